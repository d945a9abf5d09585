#!/usr/bin/env bash
# Print the path of the gVisor runtime (runsc) the platform's engines register, installing
# the pinned release first when it is missing (run as root).
#
# Debian 12's own runsc (0.0~20221219) refuses statx's AT_NO_AUTOMOUNT flag, which coreutils 9
# passes, so `ls /` and `stat` answer "Invalid argument" in every sandbox under it. The pinned
# release is Debian 13's package (a static binary: no dependencies), fetched from the Debian
# archive, checked against its SHA256 and unpacked under /usr/local/lib/belvedir/gvisor/ (dpkg
# does not know it, so nothing else on the machine changes). When it cannot be fetched (no
# archive reachable) the path of whatever runsc is installed is printed instead, with a warning
# on stderr; nothing at all when there is none.
set -euo pipefail

VERSION=0.0~20240729.0-4+b7
SHA256=3c25a5130dfac2f71237d5baad56ac86a255de87a0400f11b36a555156dc325a
MIRROR=${BELVEDIR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
URL="$MIRROR/pool/main/g/golang-gvisor-gvisor/runsc_${VERSION}_amd64.deb"
DIR=/usr/local/lib/belvedir/gvisor/${VERSION//\~/-}
BIN=$DIR/runsc

warn() { echo "gvisor.sh: $*" >&2; }

fallback() {
    warn "$1; using $(command -v runsc || echo 'no runsc') (Debian 12's runsc breaks ls in sandboxes)"
    command -v runsc || true
    exit 0
}

if [ -x "$BIN" ]; then
    echo "$BIN"
    exit 0
fi
[ "$(uname -m)" = x86_64 ] || fallback "the pinned runsc is for x86_64 only"
[ "$(id -u)" = 0 ] || fallback "not root: cannot install the pinned runsc"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 --max-time 300 -o "$tmp/runsc.deb" "$URL" || fallback "could not fetch $URL"
echo "$SHA256  $tmp/runsc.deb" | sha256sum -c --quiet - >/dev/null 2>&1 \
    || fallback "$URL does not match its pinned SHA256"
dpkg-deb -x "$tmp/runsc.deb" "$tmp/x"
"$tmp/x/usr/bin/runsc" --version >/dev/null || fallback "the pinned runsc does not start here"
mkdir -p "$DIR"
install -m 0755 "$tmp/x/usr/bin/runsc" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "$BIN"
