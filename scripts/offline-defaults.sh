#!/usr/bin/env bash
# Sourced by scripts/up.sh and scripts/test.sh, so `make up` and the tests run one configuration.
# Where no image registry answers (the sandbox image was built by its offline recipe, as
# `manage.py sandbox_image` chooses it) and the engine lacks the Harbor export's default base,
# Harbor exports and task images build FROM the local sandbox image: python:3.13-slim could
# never be pulled, and every managed Harbor run's task images would fail to build.
_sandbox_image="${BELVEDIR_SANDBOX_IMAGE:-belvedir-sandbox:latest}"
_export_default="python:3.13-slim"  # belvedir/settings/runs.py's default BELVEDIR_EXPORT_BASE_IMAGE
if [ -z "${BELVEDIR_EXPORT_BASE_IMAGE:-}" ] \
  && [ "$(docker image inspect "$_sandbox_image" \
        --format '{{index .Config.Labels "belvedir.sandbox.recipe"}}' 2>/dev/null)" = offline ] \
  && ! docker image inspect "$_export_default" >/dev/null 2>&1; then
  export BELVEDIR_EXPORT_BASE_IMAGE="$_sandbox_image"
fi
unset _sandbox_image _export_default
