#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine (run as root).
#
# Idempotent: exits at once when `docker info` already works. Otherwise it
# installs docker.io (and debootstrap, for the offline sandbox image recipe)
# when missing, starts dockerd detached from this shell (setsid + nohup, log in
# /var/log/dockerd.log) and waits up to 60 s for it to answer.
set -euo pipefail

LOG=/var/log/dockerd.log
WAIT_SECONDS=${DOCKER_WAIT_SECONDS:-60}

say() { echo "ensure-docker: $*"; }
die() {
    echo "ensure-docker: ERROR: $*" >&2
    exit 1
}

docker_ok() { docker info >/dev/null 2>&1; }

# The pid of a live dockerd (zombies left by a killed daemon do not count), or nothing.
dockerd_pid() { { ps -C dockerd -o pid=,stat= 2>/dev/null || true; } | awk '$2 !~ /^Z/ {print $1; exit}'; }

apt_updated=0
apt_install() {
    if [ "$apt_updated" = 0 ]; then
        say "apt-get update"
        apt-get update -qq || die "apt-get update failed"
        apt_updated=1
    fi
    say "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
        || die "apt-get install $* failed"
}

if ! command -v debootstrap >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "debootstrap is missing and we are not root"
    apt_install debootstrap
fi

if docker_ok; then
    exit 0
fi

[ "$(id -u)" = 0 ] || die "docker does not answer and we are not root (cannot start dockerd)"

if ! command -v dockerd >/dev/null 2>&1; then
    apt_install docker.io
fi

pid=$(dockerd_pid)
if [ -n "$pid" ]; then
    say "dockerd is already running (pid $pid); waiting for it"
else
    # A stale pid file from a killed daemon stops a new one from starting.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    say "starting dockerd (log: $LOG)"
    setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
    disown || true
fi

for _ in $(seq 1 "$WAIT_SECONDS"); do
    if docker_ok; then
        say "docker is up ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
        exit 0
    fi
    sleep 1
done

echo "ensure-docker: ERROR: docker did not answer within ${WAIT_SECONDS}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
