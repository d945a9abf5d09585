#!/usr/bin/env bash
# Run the whole test suite on PostgreSQL (DATABASE_URL), with the real Docker engine and chromium.
set -uo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/belvedir}"
export BELVEDIR_DEV=1
source scripts/offline-defaults.sh  # the configuration `make up` runs (scripts/up.sh)
.venv/bin/python -m pytest "$@"
code=$?
if [ "$code" = 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$code"
