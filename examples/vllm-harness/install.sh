#!/usr/bin/env bash
# vLLM in a virtualenv under the repo (so a re-run's cached install keeps it): the release
# current when this was written (its wheels fit the sandbox image's Python 3.13); VLLM_VERSION
# pins another, VLLM_BIN set (a vllm already on the image) skips the install.
set -euo pipefail
if [ -n "${VLLM_BIN:-}" ]; then
  echo "using ${VLLM_BIN}; nothing to install"
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet "vllm==${VLLM_VERSION:-0.33.0}"
.venv/bin/vllm --version
