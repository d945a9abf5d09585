"""The sandbox backend interface: what the run executor and the reaper may ask of a backend.

Pure Python on purpose (no Django, no backend SDK): a backend is handed one `SandboxSpec`
and launches it in one call; everything the sandbox needs is in the spec, including its
workspace (a tar unpacked into the workdir before the command starts), so a Kubernetes Job
backend can implement it with an init container as the Docker backend does with a copy
before start. After `launch` the caller streams the output, waits with a timeout, collects
named files once it has stopped, and kills and removes it. Sandboxes are found again by
label (`belvedir.run_id`), so a lost worker's sandbox can be reaped.

A managed Harbor run's task sandboxes need more of a backend, and ask it here too: build an
image from a context, run a command in a running sandbox with its output streamed, put a tar
into it and read one back, measure what it wrote, list sandboxes by a label's presence, and
remove the images it built. The isolation check asks it which runtimes the engine has; the
sandbox gateway asks it whose an address on the sandbox network is. Nothing outside this
package talks to an engine (or imports `docker`): a second backend implements this protocol
(docs/scaling.md maps each method onto Kubernetes).

Settings reach a backend in one `SandboxConfig` (`sandboxes.config`), built from Django's
settings in `belvedir.sandbox_config`, which also picks the configured backend.
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
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from sandboxes.gateway_tenants import Tenants
    from sandboxes.taskpolicy import Policy

from sandboxes.errors import NoRoom, SandboxError
from sandboxes.installcache import InstallCache, Snapshot
from sandboxes.labels import LABEL_INSTANCE, LABEL_MANAGED, LABEL_RUN_ID, LABEL_TASK_SANDBOX

__all__ = [  # the labels and the error live in leaf modules; callers import them from here
    "LABEL_INSTANCE",
    "LABEL_MANAGED",
    "LABEL_RUN_ID",
    "LABEL_TASK_SANDBOX",
    "NoRoom",
    "SandboxError",
]


SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_USER = "sandbox"


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
    "" gives it none. `shm_bytes`: the size of /dev/shm (None: the engine's 64 MB).
    `user`: uid:gid to run as ("" runs the image's own user); `cap_add`: capabilities added
    back after every one is dropped. `install_cache`: the sandbox's part in the install cache
    (start from a snapshot, or take one after the install: `sandboxes.installcache`).
    `exec_server`: a task sandbox whose commands the backend may run through a server of its
    own in the container (`sandboxes.taskd`), started instead of `command` where it can be.
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
    shm_bytes: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    runtime: str = ""
    disk_bytes: int | None = None
    user: str = f"{SANDBOX_UID}:{SANDBOX_GID}"  # "": the image's own user
    cap_add: tuple[str, ...] = ()
    install_cache: InstallCache | None = None
    exec_server: bool = False


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


class BuiltImage(NamedTuple):
    """An image `build_image` made, as `built_images` lists it."""

    id: str
    tags: list[str]
    made: float  # when, as a Unix time


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

    def find_install(self, spec: SandboxSpec) -> Snapshot | None:
        """The install snapshot on this host a sandbox of `spec` would start from (its
        `install_cache` key and organization, its image and shape); None when there is none
        (or the backend keeps no install cache)."""
        ...

    def saved_install(self, handle: SandboxHandle) -> Snapshot | None:
        """The snapshot taken after this sandbox's install (asked once, after it ended);
        None when none was (no successful install, over the budget, no cache)."""
        ...

    def sweep_install_cache(self, keep: Callable[[Snapshot], bool]) -> list[Snapshot]:
        """Remove the install snapshots on this host that `keep` says no to, and the least
        recently used over the cache's budget; those removed ([] without a cache)."""
        ...

    def sweep_warm(self) -> list[str]:
        """Remove this engine's stale warm sandboxes and fill its warm pool again; the ids
        removed ([] for a backend without a warm pool)."""
        ...

    def sweep_gone_instances(self) -> list[str]:
        """This platform instance's heartbeat on its host, then remove the sandboxes of
        instances gone from it (no heartbeat for `instance_stale` s); the ids removed ([] for a
        backend whose instances cannot leave sandboxes behind)."""
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

    def list_with_label(
        self, label: str, label_filter: Mapping[str, str] | None = None
    ) -> list[tuple[SandboxInfo, str]]:
        """Every managed sandbox that carries `label` (any value), running or not, matching
        the extra labels if given; each with its value of `label`."""
        ...

    def detach(self, handle: SandboxHandle) -> None:
        """Nobody will read this sandbox's output (`stream_logs`): let go of what holds it."""
        ...

    # --- the isolation check and the sandbox gateway ------------------------------------

    def runtimes(self) -> set[str]:
        """The OCI runtimes the engine offers ("runsc", "runc", ...); SandboxError (with the
        engine's own words) when it does not answer."""
        ...

    def runtime_command(self, name: str) -> list[str] | None:
        """The path and arguments the engine runs runtime `name` with (the GPU check reads
        runsc's --nvproxy there); None when the engine has no such runtime; SandboxError when
        it does not answer."""
        ...

    def tenants(
        self, *, network: str, organization_of: Callable[[list[str]], Mapping[str, str]]
    ) -> Tenants:
        """Whose an address on `network` is (the sandbox gateway counts connections by run
        and organization); `organization_of(run ids)` names each known run's organization."""
        ...

    # --- task sandboxes (managed Harbor): images, exec, files --------------------------

    def image_tag(self, *, context: Path, digest: str, organization: str) -> str:
        """The tag a build of `context` (whose content has `digest`) for `organization` is
        cached under: one organization's images are never another's, and a base image
        rebuilt on the engine gives a new tag."""
        ...

    def build_image(
        self,
        *,
        context: Path,
        tag: str,
        like: SandboxSpec,
        timeout: float,
        policy: Policy,
        force: bool = False,
    ) -> bool:
        """Build `tag` from the context (a tar, gzip or not) unless the engine has it (`force`:
        again, without the cache); True when it was cached. Every step that runs the
        context's commands runs in a sandbox made as `like` is (its runtime, network,
        limits, capabilities), labelled as one of `like.run_id`'s, within `policy`.
        `sandboxes.tasks.BuildFailed` (the log's tail) when it did not build."""
        ...

    def image_workdir(self, image: str) -> str:
        """The image's working directory ("/" when it sets none)."""
        ...

    def built_images(self) -> list[BuiltImage]:
        """The images this platform's `build_image` made on the engine."""
        ...

    def remove_image(self, image_id: str, tags: Sequence[str]) -> bool:
        """Remove a built image (its tags; untagged, by its id); False while a sandbox,
        running or not, still uses it."""
        ...

    def written_bytes(self, handles: Sequence[SandboxHandle]) -> dict[str, int]:
        """What each of these running sandboxes wrote to its root filesystem, by id."""
        ...

    def exec_stream(
        self,
        handle: SandboxHandle,
        *,
        command: str,
        cwd: str | None,
        env: Mapping[str, str],
        timeout: float,
        user: str = "",
    ) -> Iterator[dict]:
        """Run `command` (`bash -c`) in the running sandbox, as `user` ("": the image's),
        killed after `timeout` s: {"stream": "stdout"|"stderr", "data"} as output arrives,
        {"heartbeat": True} in long silences, last {"exit_code", "timed_out"} (or {"error"})."""
        ...

    def put_files(self, handle: SandboxHandle, *, path: str, chunks: Iterable[bytes]) -> None:
        """Extract a tar, streamed from `chunks`, into directory `path` (made when missing)."""
        ...

    def open_files(
        self, handle: SandboxHandle, *, path: str, max_bytes: int
    ) -> tuple[int | None, Iterator[bytes]]:
        """How many bytes `path` holds (a directory: all of it; None when it does not exist)
        and a tar of it (under its base name), streamed: nothing when it is missing or past
        `max_bytes`. One round trip where the sandbox can, the size known before a byte."""
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
