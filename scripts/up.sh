#!/usr/bin/env bash
# Serve Belvedir Benchmarks with demo data on http://127.0.0.1:8000: the web server (uvicorn on
# the ASGI app, scripts/serve.sh), the sandbox gateway and two django-q2 clusters.
#
# Sandboxes run on the isolated sandbox network (scripts/sandbox-network.sh, run by
# `make machine`) under gVisor, and reach this server only through the sandbox gateway on
# the network's gateway IP (172.30.0.1:$GATEWAY_PORT), which forwards the sandbox-facing
# endpoints to 127.0.0.1:$PORT. See docs/isolation.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export BELVEDIR_DEV=1
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/belvedir}"
export DEBUG="${DEBUG:-1}"
PORT="${PORT:-8000}"
GATEWAY_IP="${BELVEDIR_SANDBOX_GATEWAY:-172.30.0.1}"
GATEWAY_PORT="${GATEWAY_PORT:-18700}"
export BELVEDIR_BASE_URL="${BELVEDIR_BASE_URL:-http://127.0.0.1:$PORT}"
export BELVEDIR_SANDBOX_GATEWAY_UPSTREAM="http://127.0.0.1:$PORT"
export BELVEDIR_SANDBOX_BASE_URL="${BELVEDIR_SANDBOX_BASE_URL:-http://$GATEWAY_IP:$GATEWAY_PORT}"
# The instance's files: its logs, the "make up" key, the secret key, uploads and the demo repo.
export BELVEDIR_VAR_DIR="${BELVEDIR_VAR_DIR:-$PWD/var}"
VAR="$BELVEDIR_VAR_DIR"
# shellcheck source=scripts/offline-defaults.sh
source scripts/offline-defaults.sh  # offline: Harbor exports build FROM the sandbox image
# shellcheck source=scripts/cluster-groups.sh
source scripts/cluster-groups.sh
# Clusters an earlier up.sh left running when it was killed (SIGKILL: no trap ran) go first.
cluster_groups_stop "$VAR"
DEMO_EMAIL="${DEMO_EMAIL:-demo@belvedir.local}"
DEMO_PASSWORD="${DEMO_PASSWORD:-belvedir-demo}"

$PY manage.py ensure_database  # DATABASE_URL's database on its server, made if missing
$PY manage.py migrate --noinput -v0
$PY manage.py collectstatic --noinput -v0
$PY manage.py check  # the system checks runserver used to print (sandbox isolation, runs.W001)
$PY manage.py setup_schedules >/dev/null
# The "make up" key is made once and kept in $KEY_FILE (0600): printed again while it is
# active; revoke it in the settings and the next start makes a new one.
KEY_FILE="${MAKE_UP_KEY_FILE:-$VAR/make-up-key}"
KEY=$($PY manage.py bootstrap --org "Demo" --project "Default" --email "$DEMO_EMAIL" \
      --password "$DEMO_PASSWORD" --key-name "make up" --key-file "$KEY_FILE" --superuser \
      2>/dev/null | tail -n 1)
$PY manage.py demo_data --email "$DEMO_EMAIL"

mkdir -p "$VAR"
$PY manage.py sandbox_gateway --listen "$GATEWAY_IP:$GATEWAY_PORT" >"$VAR/gateway.log" 2>&1 &
GPID=$!
# Two django-q2 clusters: "runs" executes runs (Q_WORKERS at a time, the rest wait queued),
# "housekeeping" runs the reaper and the task former, so those never wait behind runs.
# Each starts in its own process group (setsid) and is stopped by signalling the whole group:
# `manage.py qcluster` (runs/management/commands/qcluster.py) then exits within seconds and
# leaves no worker behind; a run it stopped is failed (or requeued) by the reaper. A SIGTERM to
# the main process alone would let runs in flight finish first (Q_STOP_GRACE bounds that).
Q_CLUSTER_NAME=runs setsid $PY manage.py qcluster >"$VAR/qcluster-runs.log" 2>&1 &
RUNS_PID=$!
Q_CLUSTER_NAME=housekeeping setsid $PY manage.py qcluster >"$VAR/qcluster-housekeeping.log" 2>&1 &
HOUSEKEEPING_PID=$!
# GPU runs: one cluster per GPU type this host serves (BELVEDIR_GPU_TYPES=a10g:1,a100:2; with
# BELVEDIR_GPU_SIMULATE=1 on a machine without GPUs). docs/operating.md, "GPU runs".
GROUPS_=("-$RUNS_PID" "-$HOUSEKEEPING_PID")
GPU_CLUSTERS=""
GPU_TYPES_="${BELVEDIR_GPU_TYPES:-}"
for entry in ${GPU_TYPES_//,/ }; do
  queue="gpu-$(echo "${entry%%:*}" | tr '[:upper:]' '[:lower:]')"
  Q_CLUSTER_NAME=$queue setsid $PY manage.py qcluster >"$VAR/qcluster-$queue.log" 2>&1 &
  GROUPS_+=("-$!")
  GPU_CLUSTERS="${GPU_CLUSTERS:+$GPU_CLUSTERS, }$queue (pid $!, $VAR/qcluster-$queue.log)"
done
# Listed in $VAR/cluster-groups, so a start after this one was killed can stop them.
cluster_groups_record "$VAR" "${GROUPS_[@]#-}"
stop_clusters() {
  kill -TERM "$GPID" 2>/dev/null || true
  kill -TERM -- "${GROUPS_[@]}" 2>/dev/null || true
  # The gateway too: a restart right after must find its port free.
  for _ in $(seq 1 50); do  # 10 s, then whatever is left is killed
    alive=0
    for group in "${GROUPS_[@]}"; do kill -0 -- "$group" 2>/dev/null && alive=1; done
    kill -0 "$GPID" 2>/dev/null && alive=1
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  if [ "$alive" = 1 ]; then
    kill -KILL -- "${GROUPS_[@]}" 2>/dev/null || true
    kill -KILL "$GPID" 2>/dev/null || true
  fi
  rm -f "$(cluster_groups_file "$VAR")"
}
trap stop_clusters EXIT INT TERM
# Up once the gateway says it listens (sandboxes/gateway.py logs it after its bind): a port
# that merely answers may be another program's, and the gateway would have died on it.
for i in $(seq 1 150); do  # 30 s
  if grep -q "sandbox gateway on " "$VAR/gateway.log" 2>/dev/null; then break; fi
  if ! kill -0 $GPID 2>/dev/null || [ "$i" = 150 ]; then
    echo "up: the sandbox gateway did not start on $GATEWAY_IP:$GATEWAY_PORT:" >&2
    cat "$VAR/gateway.log" >&2; exit 1
  fi
  sleep 0.2
done

cat <<EOF2

  Belvedir Benchmarks is up: http://127.0.0.1:$PORT
  Log in as  $DEMO_EMAIL / $DEMO_PASSWORD   (also a Django admin: /admin/)
  API key    $KEY
  CLI        BELVEDIR_API_KEY=$KEY BELVEDIR_URL=http://127.0.0.1:$PORT .venv/bin/belvedir benchmarks list
  Workers    django-q2 clusters: runs (pid $RUNS_PID, $VAR/qcluster-runs.log),
             housekeeping (pid $HOUSEKEEPING_PID, $VAR/qcluster-housekeeping.log)
  GPU        ${GPU_CLUSTERS:-none (BELVEDIR_GPU_TYPES unset: GPU harnesses are refused)}
  Sandboxes  reach the platform at $BELVEDIR_SANDBOX_BASE_URL (gateway pid $GPID, log $VAR/gateway.log)
  Harbor     exports and task images build FROM ${BELVEDIR_EXPORT_BASE_IMAGE:-python:3.13-slim}

EOF2
# The web app under uvicorn (ASGI: the router streams), static files by WhiteNoise.
PORT="$PORT" HOST=127.0.0.1 bash scripts/serve.sh
