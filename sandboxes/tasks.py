"""Task sandboxes on the Docker engine: what the managed Harbor workspace asks of a container
besides the run sandbox's lifecycle (docs/task-sandboxes.md). Pure Python and docker SDK, no
Django: build a task's image from its environment directory (cached by content), run a
command with a time limit and stream its output, put a tar into a directory, read one back.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import queue
import socket
import tarfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import docker
import docker.errors
import requests
from docker.utils.socket import frames_iter

from sandboxes import dockerfile, taskbuild, taskpolicy
from sandboxes.base import SandboxError, SandboxSpec

IMAGE_REPOSITORY = "belvedir-task"
LABEL_TASK_IMAGE = "belvedir.task_image"
HEARTBEAT_SECONDS = 15.0
EXEC_BACKLOG = 16  # output chunks an exec stream holds before it stops reading from the engine
BUILD_LOG_TAIL = 3000
# Docker's default capabilities, less those a task has no use for (raw sockets, device nodes,
# audit, file capabilities, chroot): Harbor task images run as root and install packages.
TASK_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID")
TASK_CAPABILITIES += ("SETPCAP", "NET_BIND_SERVICE")
# `timeout` (coreutils) kills the command's whole process group at the deadline; images
# without it still get the platform's own deadline. `bash -c` as Harbor's own Docker and Modal
# environments run it: a login shell would read /etc/profile, which resets PATH on Debian
# (the image's ENV PATH and the PATH a caller passes would be lost).
_RUN = (
    'if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL "$0" bash -c "$1"; '
    'else exec bash -c "$1"; fi'
)


class BuildFailed(SandboxError):
    """The task's image did not build; the message ends with the build log's tail."""


def context_digest(path: Path, *, max_bytes: int | None = None) -> str:
    """The sha256 of a build context's content (a tar, gzip or not): each member's path, type,
    mode, link target and bytes, in name order; mtimes and owners do not count. SandboxError
    when it is not a tar, has no Dockerfile at its top or unpacks to more than `max_bytes`
    (a gzip bomb: the engine's builder would write it all to the platform's disk)."""
    members: list[tuple[str, bytes]] = []
    has_dockerfile = False
    unpacked = 0
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                unpacked += max(member.size, 0) + tarfile.BLOCKSIZE
                if max_bytes is not None and unpacked > max_bytes:
                    raise SandboxError(f"the context unpacks to more than {max_bytes // 2**20} MB")
                name = member.name.removeprefix("./").strip("/")
                if not name or name == ".":
                    continue
                if name.startswith("/") or ".." in name.split("/"):
                    raise SandboxError(f"the context holds a path outside it: {member.name}")
                has_dockerfile |= name == "Dockerfile" and member.isfile()
                digest = hashlib.sha256()
                digest.update(f"{name}\0{member.type!r}\0{member.mode & 0o7777}\0".encode())
                digest.update(member.linkname.encode())
                if member.isfile():
                    data = tar.extractfile(member)
                    assert data is not None
                    while chunk := data.read(1 << 20):
                        digest.update(chunk)
                members.append((name, digest.digest()))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SandboxError(f"the context is not a tar or tar.gz archive ({exc})") from None
    if not has_dockerfile:
        raise SandboxError("the context has no Dockerfile at its top")
    total = hashlib.sha256()
    for name, digest in sorted(members):
        total.update(name.encode() + b"\0" + digest)
    return total.hexdigest()


def image_tag(digest: str) -> str:
    return f"{IMAGE_REPOSITORY}:{digest[:40]}"


def dockerfile_bases(path: Path) -> list[str]:
    """The images a build context's Dockerfile builds FROM, in order (its own stages and
    `scratch` left out); [] when it cannot be read."""
    try:
        with tarfile.open(path, mode="r:*") as tar:
            member = next(
                (m for m in tar if m.name.removeprefix("./").strip("/") == "Dockerfile"), None
            )
            data = tar.extractfile(member) if member is not None and member.isfile() else None
            text = data.read().decode("utf-8", "replace") if data is not None else ""
    except (tarfile.TarError, OSError, EOFError):
        return []
    # taskbuild's reading of the Dockerfile: continuations, comments, the escape directive,
    # and global ARGs expanded in FROM as the build expands them.
    bases: list[str] = []
    stages: set[str] = {"scratch"}
    values: dict[str, str] = {}  # the ARGs before the first FROM
    seen_from = False
    for step in dockerfile.parse(text):
        if step.keyword == "ARG" and not seen_from:
            name, default = dockerfile.arg(step.rest)
            values[name] = dockerfile.expand(default or "", values)
            continue
        if step.keyword != "FROM":
            continue
        seen_from = True
        rest = [w for w in step.rest.split() if not w.startswith("--")]
        if not rest:
            continue
        base = dockerfile.expand(rest[0], values)
        if base.lower() not in stages:
            bases.append(base)
        if len(rest) >= 3 and rest[1].upper() == "AS":
            stages.add(rest[2].lower())
    return bases


def image_key(client: docker.DockerClient, context: Path, digest: str, organization: str) -> str:
    """The task image's cache key: the organization (one organization's images are never
    another's), the context's digest and the id of each base image the engine holds, so a
    rebuilt local base (the sandbox image gaining a package) builds the task's image again
    instead of reusing one made from the old base."""
    total = hashlib.sha256(f"{organization}\0{digest}".encode())
    for base in dockerfile_bases(context):
        try:
            image_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            image_id = ""  # pulled at build time; its name is the key, as before
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not look up the base image {base}: {exc}") from exc
        total.update(f"\0{base}\0{image_id}".encode())
    return total.hexdigest()


def ensure_image(
    client: docker.DockerClient,
    *,
    context: Path,
    tag: str,
    timeout: float,
    steps: taskbuild.Limits,
    policy: taskpolicy.Policy,
    labels: dict[str, str] | None = None,
    force: bool = False,
) -> bool:
    """Build `tag` from the context unless the engine has it already (`force`: build it
    again, without the build cache); True when it was cached. Its RUN steps run in
    containers made as `steps` says (`taskbuild`: under gVisor, on the sandbox network),
    the rest by the engine's builder, all within `policy` (the bases it may name, no URL
    fetched outside the sandbox, the disk it may write); the image gets `labels`. BuildFailed with the log's tail,
    SandboxError when the engine fails."""
    try:
        if not force:
            client.images.get(tag)
            return True
    except docker.errors.ImageNotFound:
        pass
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not look up the task image: {exc}") from exc
    replaced = _image_id(client, tag) if force else ""
    labels = {**(labels or {}), LABEL_TASK_IMAGE: "1"}
    if policy.organization:
        labels[taskbuild.LABEL_ORGANIZATION] = policy.organization
    try:
        taskbuild.build(
            client,
            context=context.read_bytes(),
            tag=tag,
            limits=steps,
            labels=labels,
            timeout=timeout,
            policy=policy,
            nocache=force,
        )
    except taskbuild.StepFailed as exc:
        tail = ("".join(exc.log) + "\n" + str(exc)).strip()[-BUILD_LOG_TAIL:]
        raise BuildFailed(
            f"the task's image did not build: {str(exc)[:300]}\n--- build log ---\n{tail}"
        ) from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BuildFailed(
            f"the task's image did not build: the context is not a tar: {exc}"
        ) from None
    _drop_replaced(client, tag, replaced)
    return False


def task_images(
    client: docker.DockerClient, labels: dict[str, str]
) -> list[tuple[str, list[str], float]]:
    """The engine's task images that carry `labels` (a platform's own: its instance):
    (id, tags, when it was made as a Unix time)."""
    wanted = [LABEL_TASK_IMAGE, *(f"{key}={value}" for key, value in labels.items())]
    try:
        found = client.api.images(filters={"label": wanted})
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not list the task images: {exc}") from exc
    return [
        (i["Id"], [t for t in i.get("RepoTags") or [] if t != "<none>:<none>"], float(i["Created"]))
        for i in found
    ]


def remove_task_image(client: docker.DockerClient, image_id: str, tags: list[str]) -> bool:
    """The image's tags removed (an untagged one by its id), and the image with its
    untagged parents when the last one goes; False when a container (running or not)
    still uses it."""
    try:
        for reference in tags or [image_id]:
            client.api.remove_image(reference)
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # a container uses it
            return False
        raise SandboxError(f"could not remove the task image: {exc}") from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not remove the task image: {exc}") from exc
    return True


def _image_id(client: docker.DockerClient, tag: str) -> str:
    try:
        return client.api.inspect_image(tag)["Id"]
    except docker.errors.ImageNotFound:
        return ""
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not look up the task image: {exc}") from exc


def _drop_replaced(client: docker.DockerClient, tag: str, replaced: str) -> None:
    """The image a forced build took the tag from, removed (its layers with it) unless a
    task sandbox still runs it; it would stay on the engine's disk untagged for good."""
    if not replaced or replaced == _image_id(client, tag):
        return
    try:
        client.api.remove_image(replaced)
    except (docker.errors.DockerException, requests.RequestException):
        pass  # in use, or another tag holds it


def step_limits(spec: SandboxSpec, labels: dict[str, str]) -> taskbuild.Limits:
    """A build's RUN containers made as the task sandbox `spec` is (its runtime, network,
    limits and capabilities), with `labels`."""
    return taskbuild.Limits(
        network=spec.network,
        memory=_bytes(spec.memory),
        cpus=spec.cpus,
        pids=spec.pids,
        runtime=spec.runtime,
        cap_add=spec.cap_add,
        labels=labels,
    )


def _bytes(size: str) -> int:
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    text = str(size).strip().lower().removesuffix("b")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)


def image_workdir(client: docker.DockerClient, image: str) -> str:
    """The image's WORKDIR ("/" when it sets none)."""
    try:
        config = client.api.inspect_image(image).get("Config") or {}
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not inspect the task image: {exc}") from exc
    return config.get("WorkingDir") or "/"


def written_bytes(client: docker.DockerClient, container_ids: list[str]) -> dict[str, int]:
    """What each of these running containers wrote to its root filesystem: the size of its
    writable layer (Docker's SizeRw; not tmpfs mounts, not gVisor's in-memory /tmp). The
    engine walks each layer to answer: 10-30 ms for a few thousand files."""
    if not container_ids:
        return {}
    try:
        found = client.api.containers(size=True, filters={"id": list(container_ids)})
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not measure the task sandboxes' disks: {exc}") from exc
    return {item["Id"]: int(item.get("SizeRw") or 0) for item in found}


def exec_events(
    client: docker.DockerClient,
    container_id: str,
    *,
    command: str,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    user: str = "",
) -> Iterator[dict]:
    """Run `command` under `bash -c` (as `user`, a name or uid; "": the image's); yields {"stream", "data"} as output arrives,
    {"heartbeat": True} after HEARTBEAT_SECONDS of silence, and last {"exit_code",
    "timed_out"} (or {"error"} when the engine lost it)."""
    try:
        created = client.api.exec_create(
            container_id,
            ["sh", "-c", _RUN, str(max(1, int(timeout))), command],
            environment=env or None,
            workdir=cwd or None,
            user=user,
        )
        output = client.api.exec_start(created["Id"], stream=True, demux=True)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        yield {"error": f"could not start the command: {exc}"}
        return
    # Bounded: the output waits in the engine while the caller reads slowly, not in memory.
    events: queue.Queue = queue.Queue(maxsize=EXEC_BACKLOG)
    closed = threading.Event()

    def put(item) -> bool:
        while not closed.is_set():
            try:
                events.put(item, timeout=1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for out, err in output:
                if (out and not put(("stdout", out))) or (err and not put(("stderr", err))):
                    return  # nobody reads any more
        except Exception as exc:  # the container went away under it
            put(("error", str(exc)))
        finally:
            with contextlib.suppress(Exception):
                output.close()
        put(("end", None))

    threading.Thread(target=read, daemon=True, name=f"exec {created['Id'][:12]}").start()
    try:
        yield from _exec_events(client, created["Id"], events, timeout)
    finally:
        closed.set()


def _exec_events(
    client: docker.DockerClient, exec_id: str, events: queue.Queue, timeout: float
) -> Iterator[dict]:
    started = time.monotonic()
    deadline = started + timeout + 5  # `timeout` kills first; this is the platform's own stop
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            yield {"exit_code": -1, "timed_out": True}
            return
        try:
            kind, data = events.get(timeout=min(HEARTBEAT_SECONDS, left))
        except queue.Empty:
            if time.monotonic() < deadline:
                yield {"heartbeat": True}
            continue
        if kind in ("stdout", "stderr"):
            yield {"stream": kind, "data": data.decode("utf-8", errors="replace")}
        elif kind == "error":
            yield {"error": f"the command's output broke off: {data}"}
            return
        else:
            break
    try:
        code = client.api.exec_inspect(exec_id).get("ExitCode")
    except (docker.errors.DockerException, requests.RequestException) as exc:
        yield {"error": f"could not read the command's exit code: {exc}"}
        return
    code = -1 if code is None else int(code)
    timed_out = code == 137 and time.monotonic() - started >= timeout - 1
    yield {"exit_code": code, "timed_out": timed_out}


# Files move through the container's own `tar` (docker exec), as Harbor's Docker environment
# does when `docker cp` fails: under gVisor, Docker's archive API (docker cp) reads and writes
# the container's root on the host, which misses what the sandbox keeps in its own kernel (its
# /tmp is a tmpfs of its own, where Harbor packs its transfers). As root, as Harbor's uploads.
# An image without tar falls back to Docker's archive API.
TRANSFER_USER = "0"
_PREPARE = 'mkdir -p -- "$0" || exit 1; command -v tar >/dev/null 2>&1 || exit 4'
_SIZE = (
    '[ -e "$0" ] || [ -L "$0" ] || exit 3; command -v tar >/dev/null 2>&1 || exit 4; '
    'if s=$(du -sb -- "$0" 2>/dev/null); then echo "$s" | cut -f1; '
    'else k=$(du -sk -- "$0" | cut -f1); echo $((k * 1024)); fi'
)
NO_TAR = 4


def run_quietly(
    client: docker.DockerClient, container_id: str, cmd: list[str], user: str = ""
) -> tuple[int, str]:
    """Run a small command to its end (as `user`; "": the image's): (exit code, output)."""
    try:
        created = client.api.exec_create(container_id, cmd, user=user)
        output = client.api.exec_start(created["Id"])
        code = client.api.exec_inspect(created["Id"]).get("ExitCode")
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not run {cmd[0]} in the task sandbox: {exc}") from exc
    return int(code if code is not None else -1), output.decode(errors="replace")


def put_tar(
    client: docker.DockerClient, container_id: str, *, path: str, chunks: Iterable[bytes]
) -> None:
    """Extract a tar (streamed from `chunks`) into directory `path`, created when missing."""
    code, output = run_quietly(client, container_id, ["sh", "-c", _PREPARE, path], TRANSFER_USER)
    if code == NO_TAR:
        return _put_archive(client, container_id, path=path, chunks=chunks)
    if code != 0:
        raise SandboxError(f"could not create {path}: {output.strip()[:300]}")
    try:
        created = client.api.exec_create(
            container_id, ["tar", "-x", "-f", "-", "-C", path], stdin=True, user=TRANSFER_USER
        )
        connection = client.api.exec_start(created["Id"], socket=True)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not extract the tar into {path}: {exc}") from exc
    raw = getattr(connection, "_sock", connection)
    said: list[bytes] = []

    def read_complaints() -> None:  # tar's output, read as it comes so it never blocks
        with contextlib.suppress(Exception):  # the connection closed under it
            said.extend(part for _, part in frames_iter(connection, tty=False) if part)

    reader = threading.Thread(target=read_complaints, daemon=True)
    reader.start()
    try:
        try:
            for chunk in chunks:
                raw.sendall(chunk)
        except OSError:
            pass  # tar stopped reading: its exit code and message say why
        finally:
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_WR)
            reader.join(60)
    finally:
        connection.close()
    try:
        code = client.api.exec_inspect(created["Id"]).get("ExitCode")
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not extract the tar into {path}: {exc}") from exc
    if code != 0:
        message = b"".join(said).decode(errors="replace").strip()[-300:]
        raise SandboxError(f"could not extract the tar into {path}: {message or code}")


def _put_archive(
    client: docker.DockerClient, container_id: str, *, path: str, chunks: Iterable[bytes]
) -> None:
    try:
        done = client.api.put_archive(container_id, path, chunks)
    except docker.errors.APIError as exc:
        raise SandboxError(f"could not extract the tar into {path}: {exc.explanation}") from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not extract the tar into {path}: {exc}") from exc
    if not done:
        raise SandboxError(f"could not extract the tar into {path}")


def path_size(client: docker.DockerClient, container_id: str, path: str) -> int | None:
    """How many bytes `path` holds (a directory: all of it); None when it does not exist."""
    code, output = run_quietly(client, container_id, ["sh", "-c", _SIZE, path], TRANSFER_USER)
    if code == 3:
        return None
    if code == NO_TAR:
        return _archive_size(client, container_id, path)
    if code != 0 or not output.strip().isdigit():
        raise SandboxError(f"could not read {path}: {output.strip()[:300]}")
    return int(output.strip())


def _archive_size(client: docker.DockerClient, container_id: str, path: str) -> int | None:
    try:
        _, stat = client.api.get_archive(container_id, path, chunk_size=1)
    except docker.errors.NotFound:
        return None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not read {path}: {exc}") from exc
    return int(stat.get("size") or 0)


def get_tar(
    client: docker.DockerClient, container_id: str, *, path: str, max_bytes: int
) -> Iterator[bytes]:
    """A tar of `path` as docker cp gives it (under its base name), streamed; cut off past
    `max_bytes`."""
    normal = posixpath.normpath(path)
    parent, base = posixpath.dirname(normal) or "/", posixpath.basename(normal) or "."
    code, _ = run_quietly(client, container_id, ["sh", "-c", "command -v tar"], TRANSFER_USER)
    try:
        if code != 0:  # no tar in the image: Docker's archive API
            stream, _ = client.api.get_archive(container_id, path, chunk_size=1 << 16)
        else:
            created = client.api.exec_create(
                container_id, ["tar", "-c", "-f", "-", "-C", parent, "--", base], user=TRANSFER_USER
            )
            parts = client.api.exec_start(created["Id"], stream=True, demux=True)
            stream = (out for out, _ in parts if out)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not read {path}: {exc}") from exc
    sent = 0
    for chunk in stream:
        sent += len(chunk)
        if sent > max_bytes + (1 << 20):  # the tar's headers and padding on top
            return
        yield chunk


def read_limited(source: BinaryIO, *, limit: int, chunk: int = 1 << 16) -> Iterator[bytes]:
    """`source` in chunks; SandboxError once it passes `limit` bytes."""
    total = 0
    while data := source.read(chunk):
        total += len(data)
        if total > limit:
            raise SandboxError(f"the upload is over {limit:,} bytes")
        yield data
