#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine (run as root).
#
# Idempotent and quick when everything is in place. It installs docker.io,
# debootstrap (for the offline sandbox image recipe) and runsc (gVisor, the
# sandboxes' default runtime: the pinned release of scripts/gvisor.sh, else Debian's)
# when missing; registers gVisor's runtimes, `runsc` and `runsc-gpu` (with --nvproxy, for
# GPU sandboxes; harmless on a host without a GPU: scripts/runsc-runtimes.py), in
# /etc/docker/daemon.json (merged into what is there, never clobbered); starts
# dockerd detached from this shell (setsid + nohup, log in /var/log/dockerd.log)
# when it is not running, or makes a running one reload its configuration with
# SIGHUP (never a restart: other work may be using it); and finally installs the
# isolated sandbox network and its firewall rules (scripts/sandbox-network.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

LOG=/var/log/dockerd.log
WAIT_SECONDS=${DOCKER_WAIT_SECONDS:-60}
DAEMON_JSON=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
RUNTIMES=scripts/runsc-runtimes.py # the runtimes' names and flags

say() { echo "ensure-docker: $*"; }
die() {
    echo "ensure-docker: ERROR: $*" >&2
    exit 1
}

docker_ok() { docker info >/dev/null 2>&1; }

# The pid of the main engine's live dockerd, or nothing (never a second engine's).
dockerd_pid() { bash scripts/dockerd-pid.sh; }

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

RUNSC=""
if [ "$(id -u)" = 0 ]; then
    RUNSC=$(bash scripts/gvisor.sh)
    if [ -z "$RUNSC" ]; then
        apt_install runsc || say "WARNING: runsc (gVisor) could not be installed; sandboxes need BELVEDIR_SANDBOX_RUNTIME=runc"
        RUNSC=$(command -v runsc || true)
    fi
fi

# dockerd knows both runtimes with the path and arguments $DAEMON_JSON registers (a change
# needs a reload too).
runsc_registered() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 "$RUNTIMES" check "$DAEMON_JSON"
}

if [ -n "$RUNSC" ]; then
    changed=$(python3 "$RUNTIMES" merge "$DAEMON_JSON" "$RUNSC") || die "could not update $DAEMON_JSON"
    for name in $changed; do say "registered $name in $DAEMON_JSON"; done
fi

if docker_ok; then
    if [ -n "$RUNSC" ] && ! runsc_registered; then
        pid=$(dockerd_pid)
        [ -n "$pid" ] || die "docker answers but no local dockerd to reload (is it remote?)"
        say "dockerd (pid $pid) reloads its configuration (SIGHUP) to pick up runsc and runsc-gpu"
        kill -HUP "$pid"
        for _ in $(seq 1 20); do runsc_registered && break; sleep 0.5; done
        runsc_registered || die "dockerd did not pick up the runsc and runsc-gpu runtimes of $DAEMON_JSON; see $LOG"
    fi
    [ "$(id -u)" = 0 ] && bash scripts/sandbox-network.sh
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
        bash scripts/sandbox-network.sh
        exit 0
    fi
    sleep 1
done

echo "ensure-docker: ERROR: docker did not answer within ${WAIT_SECONDS}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
