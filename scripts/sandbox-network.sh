#!/usr/bin/env bash
# Install the isolated sandbox network and its firewall rules (run as root; idempotent).
#
# Creates the Docker bridge network `belvedir-sandbox` (172.30.0.0/24, gateway 172.30.0.1,
# bridge br-belvedir, inter-container traffic off) and iptables rules tagged
# `belvedir-sandbox`: sandboxes reach the internet and TCP ports 18700-18799 on the gateway
# IP (the platform's sandbox gateway), nothing else on the host, no other container, no
# link-local address. The rules live in sandboxes/network.py; `check` only reports;
# `uninstall` takes a bridge's rules out again (each bridge has its own chains, so a second
# sandbox network, scripts/second-engine.sh's, never changes the first's rules).
# Settings: BELVEDIR_SANDBOX_{NETWORK,SUBNET,GATEWAY,BRIDGE,PORTS,ALLOW_CIDRS,EGRESS}
# (EGRESS=none: no internet, no DNS, as on an offline host). See docs/isolation.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 sandboxes/network.py "${1:-install}"
