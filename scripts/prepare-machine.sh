#!/usr/bin/env bash
# Prepare a fresh Debian machine (as root): Docker engine, debootstrap, chromium, git, gcc, and a
# PostgreSQL server answering at DATABASE_URL (scripts/ensure-postgres.sh).
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v git >/dev/null || need+=(git)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v chromium >/dev/null || need+=(chromium)
command -v dockerd >/dev/null || need+=(docker.io)
command -v gcc >/dev/null || need+=(gcc)  # the task exec server, static (make taskd)
dpkg -s libc6-dev >/dev/null 2>&1 || need+=(libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "prepare-machine: missing ${need[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "prepare-machine: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/ensure-docker.sh
bash scripts/ensure-postgres.sh
