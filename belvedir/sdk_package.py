"""The Node SDK's npm package, served for harnesses outside our sandbox image:
`npm install {BELVEDIR_BASE_URL}/sdk/node/belvedir.tgz`.

The tarball is what `npm pack` makes of the committed sdk/node (package.json and its `files`:
the built dist/ and README.md), packed here from those files in a fixed order with fixed
times, so the same commit serves the same bytes and a request runs no npm and reaches no
network. tests/belvedir/test_sdk_package.py checks it against `npm pack`.
"""

import functools
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import etag, require_safe

# The package is ~15 KB packed; anything near this means node_modules or a stray build got
# into dist/, and is refused rather than served.
MAX_BYTES = 1024 * 1024
# npm pack's own entry time (1985-10-26T08:15:00Z), so two packs of one tree are equal.
NPM_MTIME = 499162500
CONTENT_TYPE = "application/gzip"


class PackageTooLarge(Exception):
    pass


def package_root() -> Path:
    return Path(settings.BASE_DIR) / "sdk" / "node"


def package_files(root: Path) -> list[str]:
    """The paths npm pack puts in the tarball: package.json and what its `files` names."""
    manifest = json.loads((root / "package.json").read_text())
    paths = {"package.json"}
    for entry in manifest.get("files", []):
        path = root / entry
        if path.is_dir():
            found = (p for p in path.rglob("*") if p.is_file())
            paths.update(p.relative_to(root).as_posix() for p in found)
        elif path.is_file():
            paths.add(entry)
    return sorted(paths)


def pack(root: Path, *, max_bytes: int = MAX_BYTES) -> bytes:
    """The gzipped tarball of `root`'s package, every entry under package/ as npm lays it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in package_files(root):
            data = (root / name).read_bytes()
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, NPM_MTIME
            tar.addfile(info, io.BytesIO(data))
    packed = gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)
    if len(packed) > max_bytes:
        raise PackageTooLarge(f"{root} packs to {len(packed)} bytes, over {max_bytes}")
    return packed


@functools.cache
def node_tarball() -> bytes:
    return pack(package_root())


def tarball_etag(request) -> str:
    return hashlib.sha256(node_tarball()).hexdigest()[:32]


@require_safe
@etag(tarball_etag)
def node_package(request):
    """GET /sdk/node/belvedir.tgz: the Node SDK for `npm install`, no login needed (it is the
    public package; the key goes in at initialize())."""
    body = node_tarball()
    response = HttpResponse(body, content_type=CONTENT_TYPE)
    response["Content-Disposition"] = 'attachment; filename="belvedir.tgz"'
    response["Cache-Control"] = "public, max-age=300"
    response["X-Content-Type-Options"] = "nosniff"
    return response
