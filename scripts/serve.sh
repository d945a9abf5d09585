#!/usr/bin/env bash
# The web server `make up` (scripts/up.sh) runs: uvicorn serving the ASGI app
# (belvedir.asgi:application), so the model router's streamed calls work and hold no thread.
# Static files come from WhiteNoise (belvedir/settings/core.py), DEBUG or not. One process; the
# access log goes to stdout. Production runs the same app with --workers N behind a proxy
# that does not buffer text/event-stream (docs/operating.md, "Serving in production").
#
# X-Forwarded-For and X-Forwarded-Proto are believed only from the proxies listed in
# BELVEDIR_FORWARDED_ALLOW_IPS (comma-separated addresses or networks, e.g. the reverse proxy's
# 10.0.0.5); unset, as under `make up`, from none: the client's address (REMOTE_ADDR, what the
# log-in lockout and the per-address limits count) is the connection's. uvicorn's own default
# trusts 127.0.0.1, which would let anything on this host name any address it likes.
#
#   PORT=8000 HOST=127.0.0.1 [BELVEDIR_FORWARDED_ALLOW_IPS=10.0.0.5] scripts/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${BELVEDIR_FORWARDED_ALLOW_IPS:-}" ]]; then
  proxy_headers=(--proxy-headers --forwarded-allow-ips "$BELVEDIR_FORWARDED_ALLOW_IPS")
else
  proxy_headers=(--no-proxy-headers)
fi
exec .venv/bin/python -m uvicorn belvedir.asgi:application \
  --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}" --log-level "${UVICORN_LOG_LEVEL:-info}" \
  --timeout-graceful-shutdown 10 "${proxy_headers[@]}"
