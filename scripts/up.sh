#!/usr/bin/env bash
# Serve Belvedir Benchmarks with demo data on http://127.0.0.1:8000 (web server + django-q2 cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export BELVEDIR_DEV=1
export DEBUG="${DEBUG:-1}"
# Sandboxes reach this server on the host's loopback; see README for production networking.
export BELVEDIR_SANDBOX_NETWORK="${BELVEDIR_SANDBOX_NETWORK:-host}"
PORT="${PORT:-8000}"
export BELVEDIR_BASE_URL="${BELVEDIR_BASE_URL:-http://127.0.0.1:$PORT}"
DEMO_EMAIL="${DEMO_EMAIL:-demo@belvedir.local}"
DEMO_PASSWORD="${DEMO_PASSWORD:-belvedir-demo}"

$PY manage.py migrate --noinput -v0
$PY manage.py collectstatic --noinput -v0
$PY manage.py setup_schedules >/dev/null
KEY=$($PY manage.py bootstrap --org "Demo" --project "Default" --email "$DEMO_EMAIL" \
      --password "$DEMO_PASSWORD" --key-name "make up" --superuser 2>/dev/null | tail -n 1)
$PY manage.py demo_data --email "$DEMO_EMAIL"

mkdir -p var
$PY manage.py qcluster >var/qcluster.log 2>&1 &
QPID=$!
trap 'kill $QPID 2>/dev/null; wait $QPID 2>/dev/null' EXIT INT TERM

cat <<EOF2

  Belvedir Benchmarks is up: http://127.0.0.1:$PORT
  Log in as  $DEMO_EMAIL / $DEMO_PASSWORD   (also a Django admin: /admin/)
  API key    $KEY
  CLI        BELVEDIR_API_KEY=$KEY BELVEDIR_URL=http://127.0.0.1:$PORT .venv/bin/belvedir benchmarks list
  Workers    django-q2 cluster (pid $QPID, log var/qcluster.log)

EOF2
$PY manage.py runserver "127.0.0.1:$PORT" --noreload
