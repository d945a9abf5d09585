#!/usr/bin/env bash
# Build the task base image with Claude Code in it (`belvedir-claude-code:<version>`), unless
# it exists.
#
# Harbor 0.26's `claude-code` agent installs Claude Code in every task container when a trial
# starts (Anthropic's installer from downloads.claude.ai), unless `claude --version` already
# answers there; then it installs nothing. So a task image built FROM this one runs the real
# Claude Code with no internet: the sandbox image (BELVEDIR_SANDBOX_IMAGE, built by
# `python manage.py sandbox_image`) plus the pinned npm package @anthropic-ai/claude-code
# (its platform's native binary comes with it), fetched here, at image build time, the way
# the host reaches npm. An operator points the Harbor export at it (docs/harbor.md):
#
#   BELVEDIR_EXPORT_BASE_IMAGE=belvedir-claude-code:2.1.328 BELVEDIR_EXPORT_BASE_AGENTS=claude-code
#
# Prints the image's tag on its last line. Usage: scripts/claude-code-image.sh [--force]
set -euo pipefail
VERSION="${BELVEDIR_CLAUDE_CODE_VERSION:-2.1.328}"
BASE="${BELVEDIR_SANDBOX_IMAGE:-belvedir-sandbox:latest}"
TAG="${BELVEDIR_CLAUDE_CODE_IMAGE:-belvedir-claude-code:$VERSION}"
CA="${BELVEDIR_SANDBOX_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

WHAT=claude-code-image
source "$(dirname "$0")/derived-image.sh"
echo "claude-code-image: building $TAG from $BASE (@anthropic-ai/claude-code@$VERSION)" >&2
# The host network: the build reaches npm the way the host does (through its TLS proxy, whose
# CA the sandbox image already trusts: NODE_EXTRA_CA_CERTS). The sandbox's own user again at
# the end; no updater (the version is pinned, and task sandboxes may have no network). Debian's
# npm 9 installs every platform package that matches the CPU and OS, the musl build's too: only
# the one the package's postinstall linked as its binary is kept (360 MB less).
docker build --network host --label belvedir.claude-code="$VERSION" -t "$TAG" - >&2 <<DOCKERFILE
FROM $BASE
USER root
RUN NODE_EXTRA_CA_CERTS=$CA npm install -g --no-audit --no-fund --loglevel=error \
      "@anthropic-ai/claude-code@$VERSION" \
 && cd /usr/local/lib/node_modules/@anthropic-ai/claude-code \
 && for p in node_modules/@anthropic-ai/claude-code-*; do \
      [ "\$p/claude" -ef bin/claude.exe ] || rm -rf "\$p"; done \
 && rm -rf /root/.npm \
 && claude --version
ENV DISABLE_AUTOUPDATER=1
USER 1000:1000
DOCKERFILE
echo "$TAG"
