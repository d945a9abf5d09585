"""The sandbox backend interface: what the run executor and the reaper may ask of a backend.

Pure Python on purpose (no Django, no backend SDK): a backend is handed one `SandboxSpec`
and launches it in one call; everything the sandbox needs is in the spec, including its
workspace (a tar unpacked into the workdir before the command starts), so a Kubernetes Job
backend can implement it with an init container as the Docker backend does with a copy
before start. After `launch` the caller streams the output, waits with a timeout, collects
named files once it has stopped, and kills and removes it. Sandboxes are found again by
label (`belvedir.run_id`), so a lost worker's sandbox can be reaped.

Settings are read in `runs.sandbox_config`, which also picks the configured backend.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

LABEL_RUN_ID = "belvedir.run_id"
LABEL_MANAGED = "belvedir.managed"
LABEL_INSTANCE = "belvedir.instance"
LABEL_TASK_SANDBOX = "belvedir.task_sandbox"  # a managed Harbor run's task container: its id

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_USER = "sandbox"


class SandboxError(Exception):
    """Anything a sandbox backend could not do; the message is fit to show a user."""


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a backend needs to run one sandbox.

    `workspace`: a tar archive (bytes, or the path of a .tar) unpacked into `workdir` before
    `command` starts; entries keep the owners the tar gives them (`tar_directory` makes them
    uid 1000). `network`: the backend's network name ("bridge", "host", "none", …).
    `labels`: extra labels next to the backend's own (managed, run id, instance).
    `runtime`: the OCI runtime ("runsc" for gVisor, "runc"); "" is the engine's default.
    `disk_bytes`: a cap on what the sandbox may write in total; None is no cap.
    `gpu_device`: the one GPU the sandbox gets (the engine's device id: an index or a UUID);
    "" gives it none.
    `user`: uid:gid to run as ("" runs the image's own user); `cap_add`: capabilities added
    back after every one is dropped.
    """

    run_id: str
    image: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    workspace: bytes | Path | None = None
    workdir: str = "/workspace"
    network: str = "bridge"
    cpus: float = 2.0
    memory: str = "4g"
    pids: int = 512
    gpu_device: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    runtime: str = ""
    disk_bytes: int | None = None
    user: str = f"{SANDBOX_UID}:{SANDBOX_GID}"  # "": the image's own user
    cap_add: tuple[str, ...] = ()


@dataclass(frozen=True)
class SandboxHandle:
    """A launched sandbox: the backend's id for it and the run it belongs to."""

    id: str
    run_id: str


class SandboxInfo(NamedTuple):
    """One managed sandbox as `list_by_label` sees it; unpacks as (run_id, id, status)."""

    run_id: str
    id: str
    status: str  # the backend's word: created, running, exited, dead, ...


class FileKind(StrEnum):
    """What a collected path turned out to be."""

    FILE = "file"
    MISSING = "missing"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    FIFO = "FIFO (named pipe)"
    SOCKET = "socket"
    DEVICE = "device"
    OTHER = "special file"


@dataclass(frozen=True)
class Collected:
    """One path read back by `collect`: its kind, its size, and a file's bytes if they fit."""

    kind: FileKind
    size: int = 0
    content: bytes | None = None

    @property
    def too_large(self) -> bool:
        """A regular file over the byte cap: nothing of it was read."""
        return self.kind is FileKind.FILE and self.content is None


@runtime_checkable
class SandboxBackend(Protocol):
    """What every sandbox backend provides. All methods raise SandboxError on failure."""

    def ping(self) -> None:
        """Return if the engine answers; raise SandboxError (saying why) if it does not."""
        ...

    def launch(self, spec: SandboxSpec) -> SandboxHandle:
        """Create the sandbox, unpack `spec.workspace` into its workdir and start the command.

        Non-root, no capabilities, limited. Nothing is left behind when it fails.
        """
        ...

    def stream_logs(self, handle: SandboxHandle) -> Iterator[bytes]:
        """Every byte of stdout and stderr, combined, as it arrives; ends when the sandbox
        stops and all of it was yielded."""
        ...

    def wait(self, handle: SandboxHandle, timeout: float) -> int | None:
        """Wait for the command to end: its exit code, or None if `timeout` s passed first."""
        ...

    def collect(
        self, handle: SandboxHandle, paths: Sequence[str], max_bytes: int
    ) -> dict[str, Collected]:
        """Read `paths` back (after exit too): each one's kind, size and, for a regular file
        of at most `max_bytes`, its content. Raises SandboxError if the sandbox is gone."""
        ...

    def disk_full(self, handle: SandboxHandle) -> bool:
        """Whether the sandbox ran out of its disk quota (False when it has none)."""
        ...

    def sweep_volumes(self) -> list[str]:
        """Release the disk-quota volumes no sandbox uses any more; their names."""
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


def kill_run_sandboxes(backend: SandboxBackend, run_id: str) -> int:
    """Kill every running sandbox of `run_id`; how many there were."""
    running = [s for s in backend.list_by_label({LABEL_RUN_ID: run_id}) if s.status == "running"]
    for info in running:
        backend.kill(SandboxHandle(id=info.id, run_id=run_id))
    return len(running)


# --- tar helpers for the workspace -------------------------------------------------------


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
