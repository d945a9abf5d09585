"""What a task's Dockerfile may touch outside its own build (docs/task-sandboxes.md, "What a
build may touch"). A task's `environment/` directory is untrusted input (a Harbor registry
dataset brings a third party's Dockerfile), and the engine's builder does some of a build's
work outside the sandbox: it fetches `ADD <url>` from the host's own network, resolves `FROM`
and `COPY --from` against every image the engine holds (another organization's task images
and the platform's own included), and unpacks an `ADD` archive onto the host's disk. So
before any step is built, `vet` checks the Dockerfile:

- `ADD <url>` is refused: a `RUN` step (curl, wget, pip) fetches it inside the sandbox
  network, where the firewall applies;
- `FROM` and `COPY --from` name only the build's own stages, `scratch`, and the operator's
  allow-list (`Policy.bases`, exact names; a short id, a digest or a variable in `--from` is
  refused naming it);
- what every local `ADD` archive unpacks to is counted against the build's disk limit.

Pure Python, no Docker, no Django.
"""

from __future__ import annotations

import bz2
import fnmatch
import io
import lzma
import re
import tarfile
import zlib
from dataclasses import dataclass

from runs.sandbox.base import SandboxError
from runs.sandbox.dockerfile import Instruction, arg, expand, json_list, leading_flags, parse

# An image id, whole or a prefix of one (the engine resolves both), or a digest reference.
_IMAGE_ID = re.compile(r"^(?:sha256:)?[0-9a-f]{6,64}$")
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|git@)")
# What the engine's builder unpacks besides what tarfile reads (gzip, bzip2, xz): zstd.
_ZSTD = b"\x28\xb5\x2f\xfd"
_ADD_FLAGS = ("--chown=", "--chmod=", "--checksum=", "--keep-git-dir", "--link", "--exclude=")


class Refused(SandboxError):
    """The Dockerfile asks for something a task build may not do; the message names the
    step and why."""


@dataclass(frozen=True)
class Policy:
    """`bases`: the images FROM and COPY --from may name besides the build's own stages
    (BELVEDIR_TASK_BASE_IMAGES); `pull`: whether one the engine lacks may be pulled;
    `organization`: whose build it is (its images carry it, and no build cache is shared
    with another organization's); `disk`: bytes the build may add to its base image, what
    `ADD` archives unpack to included (0: no limit)."""

    bases: tuple[str, ...] = ()
    pull: bool = False
    organization: str = ""
    disk: int = 0

    def allows(self, image: str) -> bool:
        return canonical(image) in {canonical(base) for base in self.bases}


def canonical(image: str) -> str:
    """An image reference as the engine resolves a name: Docker Hub's default registry and
    `library/` dropped, `:latest` when it names no tag."""
    name = image.strip()
    for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last or "@" in last else f"{name}:latest"


def disk_message(limit: int) -> str:
    return f"more than the {limit // 2**20} MiB a task may write (BELVEDIR_TASK_SANDBOX_DISK)"


def vet(dockerfile: str, context: bytes, policy: Policy) -> None:
    """Refused, naming the step, when the Dockerfile fetches a URL, names an image outside
    its own stages and the allow-list, or has `ADD` archives that unpack past the disk
    limit. `context`: the build context as it is sent (less what .dockerignore excludes)."""
    instructions = parse(dockerfile)
    stages: set[str] = set()
    global_values: dict[str, str] = {}
    values: dict[str, str] = {}
    count = 0
    unpacked = 0
    files: dict[str, tarfile.TarInfo] | None = None
    seen_from = False
    for number, step in enumerate(instructions, 1):
        where = f"step {number} ({step.text[:80]})"
        if step.keyword == "ARG":
            name, default = arg(step.rest)
            known = {**global_values, **values}
            value = expand(default, known) if default is not None else known.get(name, "")
            (values if seen_from else global_values)[name] = value
        elif step.keyword == "ENV":
            values.update(_env_values(step.rest, {**global_values, **values}))
        elif step.keyword == "FROM":
            seen_from = True
            words = [w for w in step.rest.split() if not w.startswith("--")]
            base = expand(words[0], global_values) if words else ""
            if base and base.lower() not in stages and base != "scratch":
                _require_allowed(policy, base, where, "FROM")
            stages.add(str(count))
            count += 1
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2].lower())
            values = {}
        elif step.keyword == "COPY":
            for source in copy_sources(step):
                if "$" in source:
                    raise Refused(f"{where}: a variable in COPY --from is not supported")
                if source.lower() not in stages:
                    _require_allowed(policy, source, where, "COPY --from")
        elif step.keyword == "ADD":
            sources = _add_sources(step, {**global_values, **values}, where)
            for source in sources:
                if _URL.match(source):
                    raise Refused(
                        f"{where}: ADD from a URL is not supported in task images (the engine "
                        "would fetch it outside the sandbox network): fetch it in a RUN step "
                        "(curl, wget, pip), which runs inside it"
                    )
            if files is None:
                files = _files(context)
            for source in sources:
                room = policy.disk - unpacked if policy.disk else None
                unpacked += _unpacked(context, files, source, where, room)
                if policy.disk and unpacked > policy.disk:
                    raise Refused(f"{where}: its archives unpack to {disk_message(policy.disk)}")


def _require_allowed(policy: Policy, image: str, where: str, what: str) -> None:
    allowed = ", ".join(policy.bases) or "none"
    if "@" in image or _IMAGE_ID.match(image):
        raise Refused(
            f"{where}: {what} {image}: an image id or digest is not accepted; name one of the "
            f"allowed base images (BELVEDIR_TASK_BASE_IMAGES: {allowed})"
        )
    if not policy.allows(image):
        raise Refused(
            f"{where}: {what} {image}: not an allowed base image (BELVEDIR_TASK_BASE_IMAGES: "
            f"{allowed})"
        )


def _env_values(rest: str, known: dict[str, str]) -> dict[str, str]:
    """ENV's values as later steps see them (`ENV a=b c=d`, or the old `ENV a b`)."""
    if "=" not in rest.split(" ", 1)[0]:
        name, _, value = rest.partition(" ")
        return {name: expand(value.strip(), known)}
    found: dict[str, str] = {}
    for word in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', rest):
        found[word[0]] = expand(word[1].strip('"'), {**known, **found})
    return found


def copy_sources(step: Instruction) -> list[str]:
    """The images or stages a COPY's `--from` flags name."""
    flags, _ = leading_flags(step.rest)
    return [flag.removeprefix("--from=") for flag in flags if flag.startswith("--from=")]


def _add_sources(step: Instruction, values: dict[str, str], where: str) -> list[str]:
    """An ADD's sources (every argument but the destination), its variables expanded."""
    flags, rest = leading_flags(step.rest)
    for flag in flags:
        if not flag.startswith(_ADD_FLAGS):
            raise Refused(f"{where}: ADD {flag} is not supported in task images")
    words = json_list(rest) or rest.split()
    return [expand(word, values) for word in words[:-1]]


def _files(context: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as tar:
        return {m.name.removeprefix("./").strip("/"): m for m in tar if m.isfile()}


def _unpacked(
    context: bytes, files: dict[str, tarfile.TarInfo], source: str, where: str, room: int | None
) -> int:
    """What the context's files matching an ADD source unpack to (0 for files the builder
    copies as they are); stops counting past `room` bytes (None: counts it all)."""
    pattern = source.removeprefix("./").strip("/")
    matched = [name for name in files if name == pattern or fnmatch.fnmatchcase(name, pattern)]
    total = 0
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as tar:
        for name in matched:
            data = tar.extractfile(files[name])
            if data is None:
                continue
            head = data.read(6)
            data.seek(0)
            left = None if room is None else room - total
            total += _archive_size(data, head, f"{where}: {name}", left)
            if room is not None and total > room:
                return total
    return total


def _archive_size(data, head: bytes, what: str, room: int | None) -> int:
    """The bytes a tar (plain, gzip, bzip2 or xz) unpacks to by its headers; 0 when it is
    not an archive. Refused for one the builder would unpack but tarfile cannot read."""
    if head.startswith(_ZSTD):
        raise Refused(f"{what} is zstd-compressed: ADD it as a tar, gzip, bzip2 or xz archive")
    total = 0
    try:
        with tarfile.open(fileobj=data, mode="r|*") as archive:
            for member in archive:
                total += max(member.size, 0) + tarfile.BLOCKSIZE
                if room is not None and total > room:
                    return total
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        if total or _is_tar_header(_first_block(data, head)):
            raise Refused(f"{what} could not be read as an archive ({exc})") from None
        return 0  # not an archive (the builder reads no tar header in it): copied as it is
    return total


def _first_block(data, head: bytes) -> bytes:
    """The first tar block's worth of the file, decompressed as the builder would ("" when
    it does not decompress)."""
    data.seek(0)
    raw = data.read(1 << 16)
    try:
        if head.startswith(b"\x1f\x8b"):
            return zlib.decompressobj(wbits=31).decompress(raw, tarfile.BLOCKSIZE)
        if head.startswith(b"BZh"):
            return bz2.BZ2Decompressor().decompress(raw, tarfile.BLOCKSIZE)
        if head.startswith(b"\xfd7zXZ\x00"):
            return lzma.LZMADecompressor().decompress(raw, tarfile.BLOCKSIZE)
    except (zlib.error, OSError, EOFError, lzma.LZMAError):
        return b""
    return raw[: tarfile.BLOCKSIZE]


def _is_tar_header(block: bytes) -> bool:
    """Whether the builder would read this block as a tar header (so unpack the file)."""
    if len(block) < tarfile.BLOCKSIZE:
        return False
    try:
        tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False  # an empty block ends an archive before any member, a bad checksum is none
    return True
