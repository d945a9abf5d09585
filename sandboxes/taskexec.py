"""Commands and files in a running task sandbox on the Docker engine (docs/task-sandboxes.md):
run a command with a time limit and stream its output, put a tar into a directory, read one
back. Pure Python and docker SDK, no Django; the Docker backend's `exec_stream`, `put_files`,
and `open_files` (`sandboxes.taskbackend`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import posixpath
import queue
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import docker
import docker.errors
import requests
from docker.utils.socket import frames_iter

from sandboxes.base import SandboxError

HEARTBEAT_SECONDS = 15.0
EXEC_BACKLOG = 16  # output chunks an exec stream holds before it stops reading from the engine

# `timeout` (coreutils) kills the command's whole process group at the deadline; images
# without it still get the platform's own deadline. `bash -c` as Harbor's own Docker and Modal
# environments run it: a login shell would read /etc/profile, which resets PATH on Debian
# (the image's ENV PATH and the PATH a caller passes would be lost). Where the container's
# image is known to have `timeout` (`tools`), the exec starts it directly, without the `sh`
# that asks: under gVisor every process started in the sandbox costs (bench/README.md).
_RUN = (
    'if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL "$0" bash -c "$1"; '
    'else exec bash -c "$1"; fi'
)


def exec_command(tools: Tools, *, command: str, timeout: float, env: dict[str, str]) -> list[str]:
    """The argv of an exec: `timeout -s KILL N bash -c CMD` where `timeout` is known to be
    there (and no PATH of the caller's could hide it), else asked for by `sh` first."""
    seconds = str(max(1, int(timeout)))
    if tools.timeout and "PATH" not in env:
        return ["timeout", "-s", "KILL", seconds, "bash", "-c", command]
    return ["sh", "-c", _RUN, seconds, command]


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
    argv = exec_command(tools_of(client, container_id), command=command, timeout=timeout, env=env)
    try:
        created = client.api.exec_create(
            container_id,
            argv,
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
# The first transfer of an image's container asks what it has: `timeout` on stdout, exit 4
# without tar.
_PREPARE = (
    'mkdir -p -- "$0" || exit 1; command -v timeout >/dev/null 2>&1 && echo timeout; '
    "command -v tar >/dev/null 2>&1 || exit 4"
)
# One exec where the container is known to have tar: every exec is a process started in the
# sandbox (under gVisor, `runsc exec` on the host), most of what a transfer costs; `mkdir`
# only when the directory is not there yet.
_EXTRACT = '[ -d "$0" ] || mkdir -p -- "$0" || exit 1; exec tar -x -f - -C "$0"'
NO_TAR = 4


@dataclasses.dataclass(frozen=True)
class Tools:
    """What a container's image has (None: not learned yet)."""

    tar: bool | None = None
    timeout: bool | None = None


# What the transfers learned of each container's image, by container id and by image id: a
# container starts with its image's files, so the first transfer of one container of an
# image tells the calls to every later one (of this process) which commands it may skip. A
# task that removes its own tar or timeout only breaks its own calls (never a limit: the
# platform's deadline and the download's byte count do not depend on them).
_TOOLS: OrderedDict[str, Tools] = OrderedDict()
_IMAGE_OF: OrderedDict[str, str] = OrderedDict()
_KEPT = 4096


def _keep(table: OrderedDict, key: str, value) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > _KEPT:
        table.popitem(last=False)


def _image_of(client: docker.DockerClient, container_id: str) -> str:
    if (image := _IMAGE_OF.get(container_id)) is None:
        try:
            image = str(client.api.inspect_container(container_id).get("Image") or "")
        except (docker.errors.DockerException, requests.RequestException):
            return ""  # the call itself says what is wrong
        _keep(_IMAGE_OF, container_id, image)
    return image


def tools_of(client: docker.DockerClient, container_id: str) -> Tools:
    """What is known of the container's tar and timeout: its own, else its image's."""
    if (known := _TOOLS.get(container_id)) is not None:
        return known
    image = _image_of(client, container_id)
    known = _TOOLS.get(f"image:{image}") if image else None
    if known is not None:
        _keep(_TOOLS, container_id, known)
    return known or Tools()


def has_tar(container_id: str) -> bool | None:
    """What the transfers learned of the container's tar (None: not yet)."""
    return _TOOLS.get(container_id, Tools()).tar


def _learned(client: docker.DockerClient, container_id: str, **found: bool) -> None:
    known = dataclasses.replace(tools_of(client, container_id), **found)
    _keep(_TOOLS, container_id, known)
    if image := _image_of(client, container_id):
        _keep(_TOOLS, f"image:{image}", known)


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
    """Extract a tar (streamed from `chunks`) into directory `path`, created when missing.
    One exec once the container is known to have tar, two the first time (the check, then
    the extraction: the body can be sent only once, so the check comes first)."""
    command = ["sh", "-c", _EXTRACT, path]
    if tools_of(client, container_id).tar is not True:
        code, output = run_quietly(
            client, container_id, ["sh", "-c", _PREPARE, path], TRANSFER_USER
        )
        has_timeout = "timeout" in output.split()
        _learned(client, container_id, tar=code != NO_TAR, timeout=has_timeout)
        if code == NO_TAR:
            return _put_archive(client, container_id, path=path, chunks=chunks)
        if code != 0:
            raise SandboxError(f"could not create {path}: {output.strip()[:300]}")
        command = ["tar", "-x", "-f", "-", "-C", path]
    try:
        created = client.api.exec_create(container_id, command, stdin=True, user=TRANSFER_USER)
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


def _archive_size(client: docker.DockerClient, container_id: str, path: str) -> int | None:
    try:
        _, stat = client.api.get_archive(container_id, path, chunk_size=1)
    except docker.errors.NotFound:
        return None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not read {path}: {exc}") from exc
    return int(stat.get("size") or 0)


# A download in one exec: its size first (on stderr, `size N`, then ` timeout` where the
# image has it), then, unless past the limit, the tar (on stdout). $0 the path, $1 its
# parent, $2 its base name, $3 the limit.
# The size by parameter expansion (du's first field), not `cut` in a pipe: each subshell and
# process is one more started under gVisor. du -sk where du has no -b (busybox's).
_SIZED_TAR = (
    '[ -e "$0" ] || [ -L "$0" ] || exit 3; command -v tar >/dev/null 2>&1 || exit 4; '
    'if s=$(du -sb -- "$0" 2>/dev/null); then s=${s%%[!0-9]*}; '
    'else s=$(du -sk -- "$0") || exit 1; s=$((${s%%[!0-9]*} * 1024)); fi; '
    't=; command -v timeout >/dev/null 2>&1 && t=" timeout"; '
    'echo "size $s$t" >&2; [ "$s" -le "$3" ] || exit 5; exec tar -c -f - -C "$1" -- "$2"'
)
NOT_THERE = 3


def open_tar(
    client: docker.DockerClient, container_id: str, *, path: str, max_bytes: int
) -> tuple[int | None, Iterator[bytes]]:
    """(how many bytes `path` holds, a tar of it as docker cp gives it, streamed), in one exec
    where the image has tar: its size comes first, so a path past `max_bytes` sends nothing
    (the size and no tar), and a missing one is (None, nothing). Docker's archive API where it
    has none."""
    if tools_of(client, container_id).tar is False:
        return _archive_open(client, container_id, path=path, max_bytes=max_bytes)
    normal = posixpath.normpath(path)
    parent, base = posixpath.dirname(normal) or "/", posixpath.basename(normal) or "."
    command = ["sh", "-c", _SIZED_TAR, normal, parent, base, str(max_bytes)]
    try:
        created = client.api.exec_create(container_id, command, user=TRANSFER_USER)
        parts = client.api.exec_start(created["Id"], stream=True, demux=True)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not read {path}: {exc}") from exc
    said, size, early, has_timeout = b"", None, [], False
    for out, err in parts:
        # The engine copies stdout and stderr apart: the tar's first bytes may come first.
        if out:
            early.append(out)
        said += err or b""
        head, newline, _ = said.partition(b"\n")
        words = head.split()
        if newline and words[:1] == [b"size"] and len(words) > 1 and words[1].isdigit():
            size, has_timeout = int(words[1]), words[2:] == [b"timeout"]
            break
    if size is None:  # it ended before saying: not there, no tar, or it failed
        try:
            code = client.api.exec_inspect(created["Id"]).get("ExitCode")
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not read {path}: {exc}") from exc
        if code == NOT_THERE:
            return None, iter(())
        if code == NO_TAR:
            _learned(client, container_id, tar=False)
            return _archive_open(client, container_id, path=path, max_bytes=max_bytes)
        raise SandboxError(f"could not read {path}: {said.decode(errors='replace')[-300:]}")
    _learned(client, container_id, tar=True, timeout=has_timeout)
    if size > max_bytes:
        return size, iter(())
    return size, _limited(itertools.chain(early, (out for out, _ in parts if out)), max_bytes)


def _archive_open(
    client: docker.DockerClient, container_id: str, *, path: str, max_bytes: int
) -> tuple[int | None, Iterator[bytes]]:
    size = _archive_size(client, container_id, path)
    if size is None or size > max_bytes:
        return size, iter(())
    try:
        stream, _ = client.api.get_archive(container_id, path, chunk_size=1 << 16)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not read {path}: {exc}") from exc
    return size, _limited(stream, max_bytes)


def _limited(stream: Iterable[bytes], max_bytes: int) -> Iterator[bytes]:
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
