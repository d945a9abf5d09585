#!/usr/bin/env bash
# The web server `make up` (scripts/up.sh) runs: uvicorn serving the ASGI app
# (belvedir.asgi:application), so the model router's streamed calls work and hold no thread.
# Static files come from WhiteNoise (belvedir/settings.py), DEBUG or not. One process; the
# access log goes to stdout. Production runs the same app with --workers N behind a proxy
# that does not buffer text/event-stream (README, "Operating it").
#
#   PORT=8000 HOST=127.0.0.1 scripts/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m uvicorn belvedir.asgi:application \
  --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}" --log-level "${UVICORN_LOG_LEVEL:-info}" \
  --timeout-graceful-shutdown 10
