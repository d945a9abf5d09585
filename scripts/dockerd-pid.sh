#!/usr/bin/env bash
# Print the pid of the main Docker engine's live dockerd, or nothing: the one its pid file
# (DOCKER_PIDFILE, /var/run/docker.pid) names, else a dockerd started without a --pidfile of its
# own. Second engines (scripts/second-engine.sh, the two-engine tests) each run with their own
# --pidfile, so a reload (SIGHUP from scripts/ensure-docker.sh) never goes to one of them, even
# when it started first. Zombies left by a killed daemon do not count.
set -uo pipefail

PIDFILE=${DOCKER_PIDFILE:-/var/run/docker.pid}

alive_dockerd() {  # $1 a pid: a live (not zombie) process named dockerd
    [ -r "/proc/$1/stat" ] || return 1
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = dockerd ] || return 1
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

pid=$(cat "$PIDFILE" 2>/dev/null || true)
if [ -n "$pid" ] && alive_dockerd "$pid"; then
    echo "$pid"
    exit 0
fi
for pid in $(ps -C dockerd -o pid= 2>/dev/null || true); do
    alive_dockerd "$pid" || continue
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -e '^--pidfile' -e '^-p$' && continue
    echo "$pid"
    exit 0
done
exit 0
