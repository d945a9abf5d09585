#!/usr/bin/env bash
# Build the image Harbor runs in (`belvedir-harbor:<version>`), unless it exists.
#
# Harbor needs Python >= 3.12 and Docker Compose v2 (`docker compose`); a Debian bookworm host
# has neither, the trixie sandbox image has the first and its Debian mirror the second. So the
# image is the sandbox image (BELVEDIR_SANDBOX_IMAGE, built by `python manage.py sandbox_image`)
# plus Debian's docker-cli and docker-compose and a venv with the pinned Harbor from PyPI, with
# its `modal` extra (a Harbor harness with both Modal tokens runs Harbor's Modal environment).
# It is the run sandbox of a Harbor harness (BELVEDIR_HARBOR_IMAGE), and it drives this
# machine's Docker engine through the socket it is given:
#
#   docker run --rm --network host -v /var/run/docker.sock:/var/run/docker.sock \
#     -v "$PWD:$PWD" -w "$PWD" -e JUDGE_API_KEY belvedir-harbor:0.26.0 harbor run -p ./env -a oracle -y
#
# Prints the image's tag on its last line. Usage: scripts/harbor-image.sh [--force]
set -euo pipefail
HARBOR_VERSION="${BELVEDIR_HARBOR_VERSION:-0.26.0}"
BASE="${BELVEDIR_SANDBOX_IMAGE:-belvedir-sandbox:latest}"
TAG="${BELVEDIR_HARBOR_IMAGE:-belvedir-harbor:$HARBOR_VERSION}"

WHAT=harbor-image
source "$(dirname "$0")/derived-image.sh"
echo "harbor-image: building $TAG from $BASE (Harbor $HARBOR_VERSION)" >&2
# The host network: the build reaches the Debian mirror and PyPI the way the host does.
docker build --network host --label belvedir.harbor="$HARBOR_VERSION" -t "$TAG" - >&2 <<DOCKERFILE
FROM $BASE
USER root
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-cli docker-compose \
 && rm -rf /var/lib/apt/lists/* \
 && docker compose version
RUN python3 -m venv /opt/harbor \
 && /opt/harbor/bin/pip install -q --no-cache-dir "harbor[modal]==$HARBOR_VERSION" \
 && /opt/harbor/bin/harbor --version \
 && /opt/harbor/bin/python -c "import modal"
ENV PATH=/opt/harbor/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV HOME=/root
WORKDIR /root
DOCKERFILE
echo "$TAG"
