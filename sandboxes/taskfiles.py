"""Files in a running task sandbox on the Docker engine (docs/task-sandboxes.md): put a tar
into a directory, read one back. The Docker backend's `put_files` and `open_files`
(`sandboxes.taskbackend`).

The container's `sh`, `du`, `tar` and `timeout` are the task's, and the gateway that reads
them serves every organization: every read here is bounded in bytes and in time, whatever
they say or do not say.
"""

from __future__ import annotations

import contextlib
import itertools
import posixpath
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import docker
import docker.errors
import requests
from docker.utils.socket import STDERR, STDOUT, frames_iter

from sandboxes import taskd
from sandboxes.base import SandboxError
from sandboxes.taskexec import learned, tools_of

# Files move through the container's own `tar` (docker exec), as Harbor's Docker environment
# does when `docker cp` fails: under gVisor, Docker's archive API (docker cp) reads and writes
# the container's root on the host, which misses what the sandbox keeps in its own kernel (its
# /tmp is a tmpfs of its own, where Harbor packs its transfers). As root, as Harbor's uploads.
# A container without tar falls back to Docker's archive API.
TRANSFER_USER = "0"
# The first upload to a container asks what it has: `timeout` on stdout, exit 4 without tar.
_PREPARE = (
    'mkdir -p -- "$0" || exit 1; command -v timeout >/dev/null 2>&1 && echo timeout; '
    "command -v tar >/dev/null 2>&1 || exit 4"
)
# One exec where the container is known to have tar: every exec is a process started in the
# sandbox (under gVisor, `runsc exec` on the host), most of what a transfer costs; `mkdir`
# only when the directory is not there yet.
_EXTRACT = '[ -d "$0" ] || mkdir -p -- "$0" || exit 1; exec tar -x -f - -C "$0"'
NO_TAR = 4

# The bounds (tests shorten them). Seconds for a download's size line, a whole download, a
# whole upload, the first upload's check.
SIZE_SECONDS = 30.0
DOWNLOAD_SECONDS = 900.0
UPLOAD_SECONDS = 900.0
PREPARE_SECONDS = 30.0
SAID_KEPT = 4096  # bytes of stderr before the size line (the line itself is under 64)
SLACK = 1 << 20  # a tar's headers and padding on top of its files' bytes
COMPLAINTS_KEPT = 300  # the end of what tar says, for the error message
COMPLAINTS_READ = 1 << 20  # what tar may say during an upload before it is cut off


class _Deadline:
    """Shuts `raw` down `seconds` from now (or at `stop()`): a read blocked on it then ends
    (docker-py's reads poll with no timeout), and a send fails."""

    def __init__(self, raw: socket.socket, seconds: float):
        self.raw, self.seconds, self.fired = raw, seconds, threading.Event()
        self.end = time.monotonic() + seconds
        self._timer = threading.Timer(seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        self.fired.set()
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def cancel(self) -> None:
        self._timer.cancel()


def _open_exec(
    client: docker.DockerClient, container_id: str, cmd: list[str], *, stdin: bool, what: str
):
    """(exec id, its connection, the connection's socket): by the container's own exec server
    where it has one (`sandboxes.taskd`; its Transfer is both the id and the connection), else
    `docker exec`."""
    try:
        served = taskd.open_transfer(
            client,
            container_id,
            cmd,
            user=TRANSFER_USER,
            stdin=stdin,
            start_seconds=PREPARE_SECONDS,
        )
    except OSError as exc:
        raise SandboxError(f"{what}: {exc}") from exc
    if served is not None:
        return served, served, served.sock
    try:
        created = client.api.exec_create(container_id, cmd, stdin=stdin, user=TRANSFER_USER)
        connection = client.api.exec_start(created["Id"], socket=True)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"{what}: {exc}") from exc
    return created["Id"], connection, getattr(connection, "_sock", connection)


def _frames(connection) -> Iterator[tuple[int, bytes]]:
    """An exec's output frames, (STDOUT or STDERR, bytes), from the engine or the server."""
    if isinstance(connection, taskd.Transfer):
        return connection.frames()
    return frames_iter(connection, tty=False)


def _exit_code(client: docker.DockerClient, exec_id, what: str) -> int | None:
    if isinstance(exec_id, taskd.Transfer):
        return exec_id.exit_code
    try:
        return client.api.exec_inspect(exec_id).get("ExitCode")
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"{what}: {exc}") from exc


def _close(connection, raw: socket.socket) -> None:
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)  # the exec's process reads EOF or EPIPE
    with contextlib.suppress(Exception):
        connection.close()


def _prepare(client: docker.DockerClient, container_id: str, path: str) -> tuple[int | None, str]:
    """The first upload's check: (exit code, the end of its output), bounded like the rest."""
    what = f"could not create {path}"
    exec_id, connection, raw = _open_exec(
        client, container_id, ["sh", "-c", _PREPARE, path], stdin=False, what=what
    )
    deadline, said = _Deadline(raw, PREPARE_SECONDS), bytearray()
    try:
        with contextlib.suppress(OSError):
            for _, part in _frames(connection):
                said.extend(part)
                if len(said) > SAID_KEPT:
                    raise SandboxError(f"{what}: the sandbox said more than {SAID_KEPT} bytes")
    finally:
        deadline.cancel()
        _close(connection, raw)
    if deadline.fired.is_set():
        raise SandboxError(f"{what}: no answer within {PREPARE_SECONDS:g} s")
    return _exit_code(client, exec_id, what), said.decode(errors="replace")


def put_tar(
    client: docker.DockerClient, container_id: str, *, path: str, chunks: Iterable[bytes]
) -> None:
    """Extract a tar (streamed from `chunks`) into directory `path`, created when missing.
    One exec once the container is known to have tar, two the first time (the check, then
    the extraction: the body can be sent only once, so the check comes first). Within
    UPLOAD_SECONDS; tar may say COMPLAINTS_READ bytes meanwhile, of which the last
    COMPLAINTS_KEPT are kept."""
    command = ["sh", "-c", _EXTRACT, path]
    if tools_of(container_id).tar is not True:
        code, output = _prepare(client, container_id, path)
        learned(container_id, tar=code != NO_TAR, timeout="timeout" in output.split())
        if code == NO_TAR:
            return _put_archive(client, container_id, path=path, chunks=chunks)
        if code != 0:
            raise SandboxError(f"could not create {path}: {output.strip()[:300]}")
        command = ["tar", "-x", "-f", "-", "-C", path]
    what = f"could not extract the tar into {path}"
    exec_id, connection, raw = _open_exec(client, container_id, command, stdin=True, what=what)
    deadline, said, too_much = _Deadline(raw, UPLOAD_SECONDS), bytearray(), threading.Event()

    def read_complaints() -> None:  # tar's output, read as it comes so it never blocks
        heard = 0
        with contextlib.suppress(Exception):  # the connection closed under it
            for _, part in _frames(connection):
                heard += len(part)
                said.extend(part)
                del said[:-COMPLAINTS_KEPT]
                if heard > COMPLAINTS_READ:
                    too_much.set()
                    return deadline.stop()

    reader = threading.Thread(
        target=read_complaints, daemon=True, name=f"upload {container_id[:12]}"
    )
    reader.start()
    try:
        try:
            for chunk in chunks:
                raw.sendall(chunk)
        except OSError:
            pass  # tar stopped reading, or the deadline: its exit code and message say why
        finally:
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_WR)
            reader.join(deadline.left())
            if reader.is_alive():
                deadline.stop()
                reader.join()
    finally:
        deadline.cancel()
        _close(connection, raw)
    if too_much.is_set():
        raise SandboxError(f"{what}: tar said more than {COMPLAINTS_READ:,} bytes")
    if deadline.fired.is_set():
        raise SandboxError(f"{what}: not done within {UPLOAD_SECONDS:g} s")
    code = _exit_code(client, exec_id, what)
    if code != 0:
        message = bytes(said).decode(errors="replace").strip()
        raise SandboxError(f"{what}: {message or code}")


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
# container has it), then, unless past the limit, the tar (on stdout). $0 the path, $1 its
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
    where the container has tar: its size comes first, so a path past `max_bytes` sends
    nothing (the size and no tar), and a missing one is (None, nothing). Docker's archive API
    where it has none. The size must come within SIZE_SECONDS and SAID_KEPT bytes of stderr,
    the whole tar within DOWNLOAD_SECONDS and `max_bytes` + SLACK bytes, or SandboxError
    (raised by the stream itself once it has begun)."""
    if tools_of(container_id).tar is False:
        return _archive_open(client, container_id, path=path, max_bytes=max_bytes)
    normal = posixpath.normpath(path)
    parent, base = posixpath.dirname(normal) or "/", posixpath.basename(normal) or "."
    command = ["sh", "-c", _SIZED_TAR, normal, parent, base, str(max_bytes)]
    what = f"could not read {path}"
    exec_id, connection, raw = _open_exec(client, container_id, command, stdin=False, what=what)
    whole, first = _Deadline(raw, DOWNLOAD_SECONDS), _Deadline(raw, SIZE_SECONDS)
    frames = _frames(connection)
    try:
        try:
            size, has_timeout, early = _size_first(frames, max_bytes, what)
        finally:
            first.cancel()
        if first.fired.is_set():
            raise SandboxError(f"{what}: the sandbox said no size within {SIZE_SECONDS:g} s")
        if size is None:  # it ended before saying: not there, no tar, or it failed
            code = _exit_code(client, exec_id, what)
            if code == NOT_THERE:
                return None, _closed(whole, connection, raw)
            if code == NO_TAR:
                learned(container_id, tar=False)
                _close(connection, raw)
                return _archive_open(client, container_id, path=path, max_bytes=max_bytes)
            raise SandboxError(f"{what}: {early[-1].decode(errors='replace')[-300:]}")
    except BaseException:
        whole.cancel()
        _close(connection, raw)
        raise
    learned(container_id, tar=True, timeout=has_timeout)
    if size > max_bytes:
        return size, _closed(whole, connection, raw)
    stream = itertools.chain(early[:-1], (data for kind, data in frames if kind == STDOUT))
    return size, _tar_of(stream, whole, connection, raw, max_bytes, what)


def _size_first(frames: Iterator, max_bytes: int, what: str) -> tuple[int | None, bool, list]:
    """(the size, whether `timeout` is there, stdout before it + [what stderr said])."""
    said, early, held = b"", [], 0
    with contextlib.suppress(OSError):  # the connection shut under it
        for kind, data in frames:
            # The engine copies stdout and stderr apart: the tar's first bytes may come first.
            if kind == STDOUT:
                early.append(data)
                held += len(data)
                if held > max_bytes + SLACK:
                    raise SandboxError(f"{what}: the sandbox sent its tar before its size")
                continue
            if kind != STDERR:
                continue
            said += data
            head, newline, _ = said.partition(b"\n")
            words = head.split()
            if newline and words[:1] == [b"size"] and len(words) > 1 and words[1].isdigit():
                return int(words[1]), words[2:] == [b"timeout"], [*early, b""]
            if len(said) > SAID_KEPT:
                raise SandboxError(f"{what}: the sandbox said {SAID_KEPT:,} bytes and no size")
    return None, False, [*early, said]


def _closed(whole: _Deadline, connection, raw) -> Iterator[bytes]:
    whole.cancel()
    _close(connection, raw)
    return iter(())


def _tar_of(
    stream: Iterable[bytes], whole: _Deadline, connection, raw, max_bytes: int, what: str
) -> Iterator[bytes]:
    try:
        try:
            yield from _limited(stream, max_bytes, what)
        except OSError as exc:
            raise SandboxError(f"{what}: {exc}") from exc
        if whole.fired.is_set():
            raise SandboxError(f"{what}: not sent within {DOWNLOAD_SECONDS:g} s")
    finally:
        whole.cancel()
        _close(connection, raw)


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
    return size, _limited(stream, max_bytes, f"could not read {path}")


def _limited(stream: Iterable[bytes], max_bytes: int, what: str) -> Iterator[bytes]:
    """`stream`, or SandboxError once it passes `max_bytes` + SLACK (a size that lied, or
    busybox's du -sk counting blocks of a sparse file): the response then breaks off, so the
    caller never takes a cut tar for a whole one."""
    sent = 0
    for chunk in stream:
        sent += len(chunk)
        if sent > max_bytes + SLACK:
            raise SandboxError(f"{what}: it is over {max_bytes:,} bytes")
        yield chunk


def read_limited(source: BinaryIO, *, limit: int, chunk: int = 1 << 16) -> Iterator[bytes]:
    """`source` in chunks; SandboxError once it passes `limit` bytes."""
    total = 0
    while data := source.read(chunk):
        total += len(data)
        if total > limit:
            raise SandboxError(f"the upload is over {limit:,} bytes")
        yield data
