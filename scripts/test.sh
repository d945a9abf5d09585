#!/usr/bin/env bash
# Run the test suite on PostgreSQL (DATABASE_URL), with the real Docker engine and chromium.
#   scripts/test.sh            the whole suite, in two parts (docs/development.md):
#                              1. the tests marked neither `docker` nor `slow`, two at a time
#                                 (pytest-xdist), with DOCKER_HOST pointed at no engine: a test
#                                 that uses the engine without its marker fails here;
#                              2. the `docker` and `slow` tests, one at a time, on the engine.
#   scripts/test.sh ARGS...    pytest ARGS, one at a time, on the engine (as before the split)
set -uo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/belvedir}"
export BELVEDIR_DEV=1
source scripts/offline-defaults.sh  # the configuration `make up` runs (scripts/up.sh)
NO_ENGINE=unix:///run/belvedir-no-engine.sock  # nothing listens there (tests/helpers/engines.py)

pytest_part() {  # pytest ARGS; collecting no test is a failure
  .venv/bin/python -m pytest "$@"
  local code=$?
  if [ "$code" = 5 ]; then
    echo "scripts/test.sh: pytest collected no tests; that is a failure" >&2
    return 1
  fi
  return "$code"
}

if [ "$#" -gt 0 ]; then
  pytest_part "$@"
  exit $?
fi
echo "scripts/test.sh: part 1 of 2: the tests that need no engine, two at a time"
DOCKER_HOST=$NO_ENGINE pytest_part -m "not (docker or slow)" -n 2 --dist worksteal --durations=20
first=$?
echo "scripts/test.sh: part 2 of 2: the docker and slow tests, one at a time"
pytest_part -m "docker or slow" --durations=20
second=$?
if [ "$first" != 0 ] || [ "$second" != 0 ]; then
  echo "scripts/test.sh: failed (part 1 exit $first, part 2 exit $second)" >&2
  exit 1
fi
