#!/usr/bin/env bash
# A second Docker engine on this machine, standing in for a second worker host (run as root).
#
#   scripts/second-engine.sh start   # idempotent; prints the DOCKER_HOST to use
#   scripts/second-engine.sh stop    # stops it and takes its network's firewall rules out;
#                                    # its data root (images, network) stays for next time
#
# Its own socket, data root, exec root, pid file and configuration (the same gVisor runtimes,
# runsc and runsc-gpu, as the main engine), its own default bridge (BELVEDIR_ENGINE2_DEFAULT_BRIDGE, made here: a
# dockerd started with `--bridge none` deletes `docker0`, and both engines share this host's
# network namespace, so that would take the main engine's default bridge away) and no
# iptables changes of its own (the main engine's rules stay untouched), and the sandbox image copied over from the main engine
# (once; kept in the data root). Its sandbox network is a separate bridge and subnet
# (BELVEDIR_SANDBOX_{NETWORK,SUBNET,GATEWAY,BRIDGE} below), installed with its firewall
# rules by scripts/sandbox-network.sh against this engine. The main engine
# (/var/run/docker.sock, /etc/docker/daemon.json) is never touched.
#
# Used by tests/runs/test_two_engines.py. Settings (defaults):
#   BELVEDIR_ENGINE2_NAME (belvedir-docker2): socket /run/NAME.sock, data /var/lib/NAME,
#   exec root /run/NAME, pid /run/NAME.pid, config /var/lib/NAME.json, log /var/log/NAME.log
#   BELVEDIR_ENGINE2_SUBNET (172.31.0.0/24), _GATEWAY (172.31.0.1), _BRIDGE (br-belvedir2),
#   _NETWORK (belvedir-sandbox2); BELVEDIR_SANDBOX_IMAGE (belvedir-sandbox:latest).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=${BELVEDIR_ENGINE2_NAME:-belvedir-docker2}
SOCK=/run/$NAME.sock
DATA=/var/lib/$NAME
EXEC=/run/$NAME
PIDFILE=/run/$NAME.pid
CONFIG=/var/lib/$NAME.json
LOG=/var/log/$NAME.log
IMAGE=${BELVEDIR_SANDBOX_IMAGE:-belvedir-sandbox:latest}
export BELVEDIR_SANDBOX_NETWORK=${BELVEDIR_ENGINE2_NETWORK:-belvedir-sandbox2}
export BELVEDIR_SANDBOX_SUBNET=${BELVEDIR_ENGINE2_SUBNET:-172.31.0.0/24}
export BELVEDIR_SANDBOX_GATEWAY=${BELVEDIR_ENGINE2_GATEWAY:-172.31.0.1}
export BELVEDIR_SANDBOX_BRIDGE=${BELVEDIR_ENGINE2_BRIDGE:-br-belvedir2}
DEFAULT_BRIDGE=${BELVEDIR_ENGINE2_DEFAULT_BRIDGE:-belvedir2-dflt}
DEFAULT_BRIDGE_CIDR=${BELVEDIR_ENGINE2_DEFAULT_BRIDGE_CIDR:-172.29.255.1/24}

say() { echo "second-engine: $*"; }
die() {
    echo "second-engine: ERROR: $*" >&2
    exit 1
}
MAIN=unix:///var/run/docker.sock # the main engine, whatever DOCKER_HOST says
engine() { DOCKER_HOST=unix://$SOCK "$@"; }
main_engine() { DOCKER_HOST=$MAIN "$@"; }
running_pid() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && cat "$PIDFILE"; }

start() {
    [ "$(id -u)" = 0 ] || die "needs root (it starts dockerd)"
    command -v dockerd >/dev/null || die "dockerd is missing (scripts/prepare-machine.sh installs it)"
    if ! running_pid >/dev/null; then
        mkdir -p "$DATA" "$EXEC"
        # The same gVisor runtimes as scripts/ensure-docker.sh gives the main engine.
        python3 scripts/runsc-runtimes.py write "$CONFIG" "$(bash scripts/gvisor.sh)"
        rm -f "$PIDFILE" "$SOCK"
        if ! ip link show "$DEFAULT_BRIDGE" >/dev/null 2>&1; then
            ip link add "$DEFAULT_BRIDGE" type bridge
            ip addr add "$DEFAULT_BRIDGE_CIDR" dev "$DEFAULT_BRIDGE"
            ip link set "$DEFAULT_BRIDGE" up
        fi
        say "starting dockerd on $SOCK (data $DATA, log $LOG)"
        setsid nohup dockerd --host "unix://$SOCK" --data-root "$DATA" --exec-root "$EXEC" \
            --pidfile "$PIDFILE" --config-file "$CONFIG" --bridge "$DEFAULT_BRIDGE" --iptables=false \
            --ip6tables=false --ip-forward=false --ip-masq=false \
            >>"$LOG" 2>&1 </dev/null &
        disown || true
    fi
    for _ in $(seq 1 60); do
        engine docker info >/dev/null 2>&1 && break
        sleep 1
    done
    engine docker info >/dev/null 2>&1 || {
        tail -n 20 "$LOG" >&2
        die "dockerd on $SOCK did not answer within 60 s"
    }
    wanted=$(main_engine docker image inspect -f '{{.Id}}' "$IMAGE") || die "the main engine has no $IMAGE"
    if [ "$(engine docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null)" != "$wanted" ]; then
        say "copying $IMAGE from the main engine"
        main_engine docker save "$IMAGE" | engine docker load >/dev/null
    fi
    DOCKER_HOST=unix://$SOCK bash scripts/sandbox-network.sh install
    echo "unix://$SOCK"
}

stop() {
    pid=$(running_pid) || pid=""
    if [ -n "$pid" ]; then
        say "stopping dockerd (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -KILL "$pid" 2>/dev/null || true
    else
        say "not running"
    fi
    # Only once no sandbox of its can be running: the rules keep them off the host till then.
    bash scripts/sandbox-network.sh uninstall
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    *) die "usage: $0 start|stop" ;;
esac
