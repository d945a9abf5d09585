"""Reading a Docker sandbox's files back (`collect`: the stage marker and results.json, after
it exited too) and whether it ran out of its disk quota, for `DockerBackend`: from its quota
volume's folder on this host when it has one (`hostfiles`), else through the engine's archive
API, a file's size checked before anything of it is read.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import docker
import docker.errors
import requests
from docker.models.containers import Container

from sandboxes import hostfiles, volumes
from sandboxes.base import Collected, FileKind, SandboxError, SandboxHandle
from sandboxes.engine import docker_errors, short

# Go's os.FileMode bits, as in the X-Docker-Container-Path-Stat header of get_archive.
_GO_MODE_DIR = 1 << 31
_GO_MODE_SYMLINK = 1 << 27
_GO_MODE_DEVICE = 1 << 26
_GO_MODE_NAMED_PIPE = 1 << 25
_GO_MODE_SOCKET = 1 << 24
_GO_MODE_CHAR_DEVICE = 1 << 21
_GO_MODE_IRREGULAR = 1 << 19


class DockerReadback:
    """Mixed into `DockerBackend`, whose state it reads: the quota volumes and workdirs of the
    sandboxes it launched, the ones seen full."""

    client: docker.DockerClient
    data_dir: Path | None
    _volumes: dict[str, str]
    _workdirs: dict[str, tuple[str, Path]]
    _disk_full: set[str]

    def disk_full(self, handle: SandboxHandle) -> bool:
        """Whether the sandbox ran out of its disk quota: seen full while it was waited for,
        or full now. False without a quota."""
        self._note_disk(handle)
        return handle.id in self._disk_full

    def _note_disk(self, handle: SandboxHandle) -> None:
        name = self._volumes.get(handle.id)
        if name and self.data_dir is not None and volumes.is_full(self.data_dir, name):
            self._disk_full.add(handle.id)

    def collect(
        self, handle: SandboxHandle, paths: Sequence[str], max_bytes: int
    ) -> dict[str, Collected]:
        """Each path's kind and size, and a regular file's bytes when within `max_bytes`.

        Works after the container stopped. A file's size is checked before anything of it is
        read; directories, symlinks, FIFOs and other special files are reported, not read.
        """
        found: dict[str, Collected] = {}
        workdir, host_workdir = self._workdirs.get(handle.id, ("", None))
        for path in paths:
            relative = path[len(workdir) :].lstrip("/") if path.startswith(f"{workdir}/") else ""
            if host_workdir is not None and relative:
                try:
                    seen = hostfiles.read_file(host_workdir, relative, max_bytes)
                except OSError as exc:
                    raise SandboxError(f"could not read {path} from the sandbox: {exc}") from exc
                if seen is not None:
                    found[path] = seen
                    continue
            found[path] = self._collect_one(self._container(handle), handle, path, max_bytes)
        return found

    def _collect_one(
        self, container: Container, handle: SandboxHandle, path: str, max_bytes: int
    ) -> Collected:
        try:
            stream, info = container.get_archive(path)
        except docker.errors.NotFound:
            self._container(handle)  # raises SandboxError when the container itself is gone
            return Collected(FileKind.MISSING)
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not read {path} from the sandbox: {short(exc)}") from exc

        kind, size = _kind(info), int(info.get("size", 0))
        if kind is not FileKind.FILE or size > max_bytes:
            stream.close()
            return Collected(kind, size)
        with docker_errors(f"read {path} from the sandbox"):
            archive = _read_capped(stream, limit=max_bytes + 64 * 1024)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                return Collected(FileKind.OTHER, size)
            if member.size > max_bytes:  # it grew between the stat and the read
                return Collected(FileKind.FILE, member.size)
            extracted = tar.extractfile(member)
            assert extracted is not None
            content = extracted.read()
        return Collected(FileKind.FILE, len(content), content)


def _kind(info: Mapping[str, object]) -> FileKind:
    mode = int(info.get("mode", 0) or 0)
    if mode & _GO_MODE_SYMLINK or info.get("linkTarget"):
        return FileKind.SYMLINK
    if mode & _GO_MODE_DIR:
        return FileKind.DIRECTORY
    if mode & _GO_MODE_NAMED_PIPE:
        return FileKind.FIFO
    if mode & _GO_MODE_SOCKET:
        return FileKind.SOCKET
    if mode & (_GO_MODE_DEVICE | _GO_MODE_CHAR_DEVICE):
        return FileKind.DEVICE
    if mode & _GO_MODE_IRREGULAR:
        return FileKind.OTHER
    return FileKind.FILE


def _read_capped(stream: Iterator[bytes], *, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    for chunk in stream:
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise SandboxError(f"the archive grew past {limit} bytes while reading it")
    return b"".join(chunks)
