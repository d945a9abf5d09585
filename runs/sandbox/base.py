"""The sandbox backend interface: what the run executor and the reaper may ask of a backend.

A backend runs one command in an isolated container per run: created (not started) with
limits and labels, files copied in, started, its output streamed, waited for with a
timeout, a file read back, killed and removed. Containers are found again by run id
(label `belvedir.run_id`), so a lost worker's sandbox can be reaped.

Docker is the first backend (`runs.sandbox.docker.DockerBackend`); `get_backend()` picks
the configured one.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

LABEL_RUN_ID = "belvedir.run_id"
LABEL_MANAGED = "belvedir.managed"
LABEL_INSTANCE = "belvedir.instance"

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_USER = "sandbox"


class SandboxError(Exception):
    """Anything a sandbox backend could not do; the message is fit to show a user."""


class SandboxFileTooLarge(SandboxError):
    """`read_file` found the file but it is larger than `max_bytes` (nothing was returned)."""

    def __init__(self, path: str, size: int, max_bytes: int) -> None:
        super().__init__(f"{path} is {size} bytes, over the {max_bytes} byte limit")
        self.path = path
        self.size = size
        self.max_bytes = max_bytes


@dataclass(frozen=True)
class SandboxHandle:
    """A created sandbox: the backend's container id and the run it belongs to."""

    id: str
    run_id: str


class SandboxInfo(NamedTuple):
    """One managed sandbox as `list_by_label` sees it; unpacks as (run_id, id, status)."""

    run_id: str
    id: str
    status: str  # the backend's word: created, running, exited, dead, ...


@runtime_checkable
class SandboxBackend(Protocol):
    """What every sandbox backend provides. All methods raise SandboxError on failure."""

    def create(
        self,
        *,
        run_id: str,
        image: str,
        command: list[str],
        env: dict[str, str],
        workdir: str,
        network: str,
        cpus: float,
        memory: str,
        pids: int,
        gpu: bool = False,
    ) -> SandboxHandle:
        """Create (not start) a sandbox for `run_id`: non-root, no capabilities, limited."""
        ...

    def put_files(self, handle: SandboxHandle, dest_dir: str, archive: bytes | Path) -> None:
        """Unpack a tar archive (bytes, or a path to a .tar) into existing `dest_dir`."""
        ...

    def start(self, handle: SandboxHandle) -> None:
        """Start the command."""
        ...

    def stream_logs(self, handle: SandboxHandle) -> Iterator[bytes]:
        """Yield stdout and stderr, combined, as they arrive; ends when the sandbox stops."""
        ...

    def wait(self, handle: SandboxHandle, timeout: float) -> int | None:
        """Wait for the command to end: its exit code, or None if `timeout` s passed first."""
        ...

    def read_file(self, handle: SandboxHandle, path: str, max_bytes: int) -> bytes | None:
        """A regular file's content (works after exit too); None if it does not exist.

        Raises SandboxFileTooLarge past `max_bytes`, SandboxError if it is not a file.
        """
        ...

    def kill(self, handle: SandboxHandle) -> None:
        """Stop the command at once (SIGKILL); fine if it has already stopped."""
        ...

    def remove(self, handle: SandboxHandle) -> None:
        """Remove the sandbox and everything in it; fine if it is already gone."""
        ...

    def list_by_label(self, label_filter: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Every managed sandbox, running or not, matching the extra labels if given."""
        ...

    def kill_by_run_id(self, run_id: str) -> int:
        """Kill every running sandbox of `run_id`; return how many were killed."""
        ...


@dataclass(frozen=True)
class SandboxSettings:
    """The create() arguments that come from settings rather than from the run."""

    image: str = "belvedir-sandbox:latest"
    network: str = "bridge"
    cpus: float = 2.0
    memory: str = "4g"
    pids: int = 512

    @classmethod
    def from_settings(cls) -> SandboxSettings:
        """Read BELVEDIR_SANDBOX_{IMAGE,NETWORK,CPUS,MEMORY,PIDS} (defaults above)."""
        from django.conf import settings

        return cls(
            image=getattr(settings, "BELVEDIR_SANDBOX_IMAGE", cls.image),
            network=getattr(settings, "BELVEDIR_SANDBOX_NETWORK", cls.network),
            cpus=float(getattr(settings, "BELVEDIR_SANDBOX_CPUS", cls.cpus)),
            memory=str(getattr(settings, "BELVEDIR_SANDBOX_MEMORY", cls.memory)),
            pids=int(getattr(settings, "BELVEDIR_SANDBOX_PIDS", cls.pids)),
        )

    def create_kwargs(self) -> dict[str, object]:
        """Keyword arguments for `SandboxBackend.create`."""
        return {
            "image": self.image,
            "network": self.network,
            "cpus": self.cpus,
            "memory": self.memory,
            "pids": self.pids,
        }


def instance_id() -> str:
    """Which platform a sandbox belongs to: BELVEDIR_INSTANCE, else derived from the database.

    Two platforms (or a dev server and a test session) on one Docker engine have different
    databases, so neither reaps the other's live sandboxes.
    """
    import hashlib

    from django.conf import settings
    from django.db import connection

    configured = getattr(settings, "BELVEDIR_INSTANCE", "")
    if configured:
        return configured
    db = connection.settings_dict
    key = f"{db.get('ENGINE')}|{db.get('HOST')}|{db.get('PORT')}|{db.get('NAME')}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def get_backend() -> SandboxBackend:
    """The configured backend (setting BELVEDIR_SANDBOX_BACKEND, default "docker")."""
    from django.conf import settings

    name = getattr(settings, "BELVEDIR_SANDBOX_BACKEND", "docker")
    if name == "docker":
        from runs.sandbox.docker import DockerBackend

        return DockerBackend.from_settings()
    raise SandboxError(f"unknown sandbox backend {name!r} (BELVEDIR_SANDBOX_BACKEND)")


# --- tar helpers for put_files -----------------------------------------------------------


def tar_directory(
    path: str | os.PathLike[str], arcname: str, uid: int = SANDBOX_UID, gid: int = SANDBOX_GID
) -> bytes:
    """A tar of directory `path` stored as `arcname/…`, every entry owned by uid:gid.

    Symlinks stay symlinks; sockets, FIFOs and device files are left out. Owners get
    read/write (and search on directories) so the sandbox user can change its copy.
    """
    source = Path(path)
    if not source.is_dir():
        raise SandboxError(f"{source} is not a directory")

    def own(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
            return None
        info.uid, info.gid = uid, gid
        info.uname = info.gname = SANDBOX_USER if uid == SANDBOX_UID else ""
        info.mode |= stat.S_IRUSR | stat.S_IWUSR | (stat.S_IXUSR if info.isdir() else 0)
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(source, arcname=arcname.strip("/") or ".", recursive=True, filter=own)
    return buffer.getvalue()


def tar_files(files: Mapping[str, bytes], uid: int = SANDBOX_UID, gid: int = SANDBOX_GID) -> bytes:
    """A tar of in-memory files ({"tasks.jsonl": b"..."}), owned by uid:gid, mode 0644.

    Names may hold folders ("data/tasks.jsonl"); those get entries owned by uid:gid too.
    """
    uname = SANDBOX_USER if uid == SANDBOX_UID else ""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        made: set[str] = set()
        for name, content in files.items():
            parts = name.strip("/").split("/")
            for depth in range(1, len(parts)):
                parent = "/".join(parts[:depth])
                if parent not in made:
                    made.add(parent)
                    info = tarfile.TarInfo(parent)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    info.uid, info.gid, info.uname, info.gname = uid, gid, uname, uname
                    tar.addfile(info)
            info = tarfile.TarInfo("/".join(parts))
            info.size = len(content)
            info.mode = 0o644
            info.uid, info.gid, info.uname, info.gname = uid, gid, uname, uname
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
