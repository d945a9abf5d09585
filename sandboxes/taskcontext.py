"""A task's build context as the engine's builder is sent it (`sandboxes.taskbuild`): its
Dockerfile read from it, and the context less what the task's .dockerignore excludes, as the
docker CLI sends it, with one more Dockerfile (a build piece) at its top when asked.
"""

from __future__ import annotations

import io
import posixpath
import tarfile

from docker.utils.build import PatternMatcher

PIECES_DIR = ".belvedir-build"


def dockerfile_of(context: bytes) -> str | None:
    """The Dockerfile at the context's top; None when it has none."""
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as tar:
        for member in tar:
            if member.name.removeprefix("./") == "Dockerfile" and member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                return data.read().decode("utf-8", errors="replace")
    return None


def sent_context(context: bytes, piece: tuple[str, str] | None = None) -> bytes:
    """The context (a tar, gzip or not) as the docker CLI sends it: less what the task's
    .dockerignore excludes (the engine itself drops only the Dockerfile it builds and the
    .dockerignore). `piece` (name, text): one more Dockerfile at its top, which the
    .dockerignore sent keeps out of the image (appended to the task's own, or made)."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as source,
        tarfile.open(fileobj=out, mode="w") as tar,
    ):
        members = source.getmembers()
        ignore = b""
        for member in members:
            if member.name.removeprefix("./") == ".dockerignore" and member.isfile():
                data = source.extractfile(member)
                assert data is not None
                ignore = data.read()
        excluded = PatternMatcher(_ignore_patterns(ignore.decode("utf-8", "replace")))
        for member in members:
            clean = member.name.removeprefix("./").strip("/")
            if clean == ".dockerignore" or (piece and clean.startswith(PIECES_DIR)):
                continue
            built = piece is None and clean == "Dockerfile"  # the engine drops it if excluded
            if clean and clean != "." and not built and excluded.matches(clean):
                continue
            tar.addfile(member, source.extractfile(member) if member.isfile() else None)
        added = [(".dockerignore", ignore)] if ignore else []
        if piece is not None:
            made = not ignore
            ignore += f"\n{PIECES_DIR}*\n".encode() + (b".dockerignore\n" if made else b"")
            added = [(".dockerignore", ignore), (piece[0], piece[1].encode())]
        for path, data in added:
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _ignore_patterns(text: str) -> list[str]:
    """A .dockerignore's patterns as the docker CLI reads them (comments and blank lines
    dropped, each cleaned and made relative)."""
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = posixpath.normpath(line.removeprefix("!").strip()).lstrip("/")
        if line and line != ".":
            patterns.append(("!" if negated else "") + line)
    return patterns
