# Sourced (with the script's arguments) by the scripts that build an image FROM the sandbox
# image, harbor-image.sh and claude-code-image.sh, once they set TAG, BASE and WHAT (their
# name): prints TAG and exits when that image exists, unless the first argument is --force;
# fails when BASE is missing.
if [ "${1:-}" != "--force" ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "$TAG"
  exit 0
fi
docker image inspect "$BASE" >/dev/null 2>&1 || {
  echo "$WHAT: $BASE is missing; build it first (python manage.py sandbox_image)" >&2
  exit 1
}
