"""What a task's Dockerfile may touch outside its own build (docs/task-sandboxes.md, "What a
build may touch"). A task's `environment/` directory is untrusted input (a Harbor registry
dataset brings a third party's Dockerfile), and the engine's builder does some of a build's
work outside the sandbox: it fetches `ADD <url>` from the host's own network, resolves `FROM`
and `COPY --from` against every image the engine holds (another organization's task images
and the platform's own included; one it lacks it pulls), and unpacks an `ADD` archive onto
the host's disk. So before any step is built, `vet` reads the Dockerfile and gives back the
instructions the builder may send, or refuses:

- `ADD <url>` is refused: a `RUN` step (curl, wget, pip) fetches it inside the sandbox
  network, where the firewall applies; `ADD` of an archive is refused (a `RUN` step unpacks
  it under gVisor); every other `ADD` is sent as `COPY`, so the engine never unpacks a file;
- `FROM` and `COPY --from` name only the build's own stages, `scratch`, and the operator's
  allow-list (`Policy.bases`, exact names; an image id, a digest is refused naming it);
- the engine's builder never reads a word of `FROM`, `COPY` or `ADD` as we did not: each is
  sent rewritten from our own reading (variables expanded, JSON form, no quote, escape or `$`
  left for it to interpret), unknown instructions are refused, and no line it is sent ends in
  an escape character or holds a control character.

Pure Python, no Docker, no Django.
"""

from __future__ import annotations

import bz2
import io
import json
import lzma
import posixpath
import re
import tarfile
import zlib
from dataclasses import dataclass

from sandboxes.dockerfile import (
    Instruction,
    arg,
    escape_of,
    expand,
    json_list,
    leading_flags,
    parse,
)
from sandboxes.errors import SandboxError

# Docker's classic builder's instructions; any other word is refused, not guessed at.
KEYWORDS = {
    "FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
    "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip
# An image id, whole or a prefix of one (the engine resolves both).
_IMAGE_ID = re.compile(r"^(?:sha256:)?[0-9a-f]{6,64}$")
# An image reference with nothing in it for the engine to expand or unquote.
_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|^git@")
# What a COPY/ADD word may not hold once we expanded it: anything the engine would read again.
_UNSAFE = re.compile(r"[$\\\"'`\x00-\x1f\x7f]")
_FLAG_VALUE = re.compile(r"^[A-Za-z0-9_.:/@+-]+$")
_FLAGS = {"COPY": {"--from", "--chown", "--chmod"}, "ADD": {"--chown", "--chmod"}}
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_ZSTD = b"\x28\xb5\x2f\xfd"


class Refused(SandboxError):
    """The Dockerfile asks for something a task build may not do; the message names the
    step and why."""


@dataclass(frozen=True)
class Policy:
    """`bases`: the images FROM and COPY --from may name besides the build's own stages
    (BELVEDIR_TASK_BASE_IMAGES); `pull`: whether one the engine lacks may be pulled;
    `organization`: whose build it is (its images carry it, and no build cache is shared
    with another organization's); `disk`: bytes the build may add to its base image (0: no
    limit)."""

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


def vet(dockerfile: str, context: bytes, policy: Policy) -> list[Instruction]:
    """The Dockerfile's instructions as the builder may send them (FROM, COPY and ADD
    rewritten from our reading); Refused, naming the step, when it fetches a URL, names an
    image outside its own stages and the allow-list, ADDs an archive, or holds what the
    engine would read otherwise than we do. `context`: the build context as it is sent
    (less what .dockerignore excludes)."""
    escape = escape_of(dockerfile)
    stages: set[str] = set()
    global_values: dict[str, str] = {}
    values: dict[str, str] = {}
    count = 0
    files: dict[str, tarfile.TarInfo] | None = None
    seen_from = False
    sent: list[Instruction] = []
    for number, step in enumerate(parse(dockerfile), 1):
        where = f"step {number} ({step.text[:80]})"
        if step.keyword not in KEYWORDS:
            raise Refused(f"{where}: {step.keyword} is not a Dockerfile instruction")
        if step.keyword != "RUN":  # a RUN's text never reaches the engine's builder
            if _CONTROL.search(step.text) or step.text.rstrip().endswith((escape, "\\", "`")):
                raise Refused(f"{where}: a control character or a trailing escape character")
        if step.keyword == "ONBUILD":
            raise Refused(f"{where}: ONBUILD is not supported in task images")
        if step.heredocs and step.keyword != "RUN":
            raise Refused(f"{where}: heredocs are supported in RUN only, not in {step.keyword}")
        if step.keyword == "ARG":
            name, default = arg(step.rest)
            known = {**global_values, **values}
            value = expand(default, known) if default is not None else known.get(name, "")
            (values if seen_from else global_values)[name] = value
        elif step.keyword == "ENV":
            values.update(_env_values(step.rest, {**global_values, **values}))
        elif step.keyword == "FROM":
            seen_from = True
            step = _from(step, where, global_values, stages, count, policy)
            count += 1
            values = {}
        elif step.keyword in ("COPY", "ADD"):
            if files is None:
                files = _files(context)
            step = _copy(step, where, {**global_values, **values}, stages, policy, files, context)
        sent.append(step)
    return sent


def _from(
    step: Instruction,
    where: str,
    values: dict[str, str],
    stages: set[str],
    count: int,
    policy: Policy,
) -> Instruction:
    words = [w for w in step.rest.split() if not w.startswith("--platform")]
    if not words or len(words) not in (1, 3) or (len(words) == 3 and words[1].upper() != "AS"):
        raise Refused(f"{where}: FROM takes an image and optionally AS a name")
    base = expand(words[0], values)
    alias = words[2].lower() if len(words) == 3 else ""
    if alias and not re.fullmatch(r"[a-z][a-z0-9_.-]*", alias):
        raise Refused(f"{where}: {alias!r} is not a stage name")
    if base.lower() not in stages and base != "scratch":
        _require_allowed(policy, base, where, "FROM")
    stages.add(str(count))
    if alias:
        stages.add(alias)
    text = f"FROM {base}" + (f" AS {alias}" if alias else "")
    return Instruction("FROM", text.removeprefix("FROM "), text)


def _require_allowed(policy: Policy, image: str, where: str, what: str) -> None:
    allowed = ", ".join(policy.bases) or "none"
    if "@" in image or _IMAGE_ID.match(image):
        raise Refused(
            f"{where}: {what} {image}: an image id or digest is not accepted; name one of the "
            f"allowed base images (BELVEDIR_TASK_BASE_IMAGES: {allowed})"
        )
    if not _REFERENCE.match(image) or not policy.allows(image):
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


def _copy(
    step: Instruction,
    where: str,
    values: dict[str, str],
    stages: set[str],
    policy: Policy,
    files: dict[str, tarfile.TarInfo],
    context: bytes,
) -> Instruction:
    """A COPY or ADD as the builder may send it: `COPY`, its flags and its words expanded
    by us, the words in JSON form; an ADD of a URL or an archive refused."""
    if step.keyword == "ADD" and _URL.search(step.rest):
        raise _url_refusal(where)
    flags, rest = leading_flags(step.rest)
    sent_flags = []
    for flag in flags:
        name, equals, value = flag.partition("=")
        value = expand(value, values)
        if name not in _FLAGS[step.keyword] or (equals and not _FLAG_VALUE.match(value)):
            raise Refused(f"{where}: {step.keyword} {flag} is not supported in task images")
        if name == "--from" and value.lower() not in stages:
            _require_allowed(policy, value, where, "COPY --from")
        sent_flags.append(f"{name}={value}" if equals else name)
    listed = json_list(rest)
    words = [expand(w, values) for w in (listed if listed is not None else rest.split())]
    if len(words) < 2:
        raise Refused(f"{where}: {step.keyword} takes sources and a destination")
    for word in words:
        if not word or _UNSAFE.search(word) or (listed is None and " " in word):
            raise Refused(
                f"{where}: {word!r}: quotes, escapes, variables the platform cannot resolve "
                "and control characters are not supported in COPY and ADD"
            )
    if step.keyword == "ADD":
        for source in words[:-1]:
            if _URL.search(source):
                raise _url_refusal(where)
            _refuse_archives(context, files, source, where)
    rest = " ".join([*sent_flags, json.dumps(words, ensure_ascii=False)])
    return Instruction("COPY", rest, f"COPY {rest}")


def _url_refusal(where: str) -> Refused:
    return Refused(
        f"{where}: ADD from a URL is not supported in task images (the engine would fetch it "
        "outside the sandbox network): fetch it in a RUN step (curl, wget, pip), which runs "
        "inside it"
    )


def _files(context: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as tar:
        return {posixpath.normpath(m.name).lstrip("/"): m for m in tar}


def _refuse_archives(
    context: bytes, files: dict[str, tarfile.TarInfo], source: str, where: str
) -> None:
    """Refused when the source names (or matches) an archive of the context: the engine
    would unpack it on the host's disk, outside the sandbox. (An archive this misses is
    copied as it is: the ADD is sent as COPY.)"""
    if "[" in source:
        raise Refused(f"{where}: a [ ] pattern in an ADD source is not supported; use COPY")
    pattern = posixpath.normpath(source).lstrip("/")
    pattern = "" if pattern == "." else pattern
    matched = [n for n in files if n == pattern or (pattern and _matches(pattern, n))]
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as tar:
        for name in matched:
            member = files[name]
            if not member.isfile():
                continue
            data = tar.extractfile(member)
            if data is not None and _is_archive(data.read(1 << 16)):
                raise Refused(
                    f"{where}: {name} is an archive, which the engine would unpack outside the "
                    "sandbox: COPY it and unpack it in a RUN step (tar -xf …), which runs "
                    "inside it, within the task's disk limit"
                )


def _matches(pattern: str, name: str) -> bool:
    """A path matched by a pattern of `*` and `?` segment by segment, as Go's filepath.Match."""
    parts, names = pattern.split("/"), name.split("/")
    if len(parts) != len(names):
        return False
    for part, segment in zip(parts, names, strict=True):
        regex = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part)
        if not re.fullmatch(regex, segment):
            return False
    return True


def _is_archive(head: bytes) -> bool:
    """Whether the engine's builder would unpack a file that starts so: a tar, plain or
    compressed (gzip, bzip2, xz, zstd), by its first header block."""
    if head.startswith(_ZSTD):
        return True
    try:
        if head.startswith(b"\x1f\x8b"):
            head = zlib.decompressobj(wbits=31).decompress(head, tarfile.BLOCKSIZE)
        elif head.startswith(b"BZh"):
            head = bz2.BZ2Decompressor().decompress(head, tarfile.BLOCKSIZE)
        elif head.startswith(b"\xfd7zXZ\x00"):
            head = lzma.LZMADecompressor().decompress(head, tarfile.BLOCKSIZE)
    except (zlib.error, OSError, EOFError, lzma.LZMAError):
        return True  # compressed, and not readable here: not sent to be unpacked either
    block = head[: tarfile.BLOCKSIZE]
    if len(block) < tarfile.BLOCKSIZE:
        return False
    try:
        tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except tarfile.EmptyHeaderError:
        return False
    except tarfile.HeaderError:
        # A bad checksum is no tar to Python, but Go's reader tries other formats: a block
        # with a tar magic is taken as an archive all the same.
        return block[257:262] == b"ustar"
    return True
