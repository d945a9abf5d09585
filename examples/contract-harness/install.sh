#!/usr/bin/env bash
set -e
echo "installing contract-harness as $(id -un) in $(pwd)"
if [ "${INSTALL_FAIL:-}" = 1 ]; then echo "install failed on purpose" >&2; exit 3; fi
touch .installed
