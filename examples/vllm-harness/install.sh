#!/usr/bin/env bash
# vLLM in a virtualenv under the repo (so a re-run's cached install keeps it). VLLM_VERSION pins
# another release; VLLM_BIN set (a vllm already on the image) skips the install.
set -euo pipefail
if [ -n "${VLLM_BIN:-}" ]; then
  echo "using ${VLLM_BIN}; nothing to install"
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet "vllm==${VLLM_VERSION:-0.8.5}"
.venv/bin/vllm --version
