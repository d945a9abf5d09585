"""An in-memory sandbox backend, written against `sandboxes.base.SandboxBackend` alone: no
engine, no `docker` import, nothing of the Docker backend. The platform picks it as it picks
any backend (BELVEDIR_SANDBOX_BACKEND = "tests.helpers.fake_backend:FakeBackend"), so a run
and a task sandbox that go through it prove the interface is all the platform asks of one.

A sandbox is a dict of files (its workspace unpacked into it, paths absolute). A run sandbox's
command is played at launch by the engine's `harness` (a function of the sandbox: its exit
code), whose output is what `stream_logs` yields; a sandbox whose command is
`sleep infinity` (a task sandbox) runs until it is killed. `exec_stream` knows three commands
(`echo TEXT`, `cat PATH`, `exit N`). Every backend made for one instance shares one engine.
"""

from __future__ import annotations

import io
import itertools
import posixpath
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.base import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_RUN_ID,
    BuiltImage,
    Collected,
    FileKind,
    SandboxError,
    SandboxHandle,
    SandboxInfo,
    SandboxSpec,
)
from sandboxes.config import SandboxConfig
from sandboxes.gateway_tenants import MappedTenants, Tenants

RUNNING, EXITED = "running", "exited"
_ids = itertools.count(1)


@dataclass
class FakeSandbox:
    id: str
    spec: SandboxSpec
    labels: dict[str, str]
    files: dict[str, bytes] = field(default_factory=dict)
    status: str = RUNNING
    exit_code: int | None = None
    output: list[bytes] = field(default_factory=list)
    written: int = 0  # what `written_bytes` reports
    detached: bool = False

    def write(self, path: str, content: bytes) -> None:
        self.files[posixpath.normpath(path)] = content
        self.written += len(content)

    def say(self, text: str) -> None:
        self.output.append(text.encode())


@dataclass
class FakeImage:
    id: str
    tag: str
    workdir: str
    made: float


@dataclass
class FakeEngine:
    """What the backends of one instance share: the sandboxes, the images, the harness."""

    harness: Callable[[FakeSandbox], int] = lambda sandbox: 0
    sandboxes: dict[str, FakeSandbox] = field(default_factory=dict)
    images: dict[str, FakeImage] = field(default_factory=dict)
    builds: list[str] = field(default_factory=list)  # tags, in the order they were built
    lock: threading.Lock = field(default_factory=threading.Lock)


ENGINES: dict[str, FakeEngine] = {}


def engine_of(instance: str | None) -> FakeEngine:
    return ENGINES.setdefault(instance or "", FakeEngine())


class FakeBackend:
    """`SandboxBackend` in memory; see the module."""

    def __init__(self, engine: FakeEngine, instance: str | None = None) -> None:
        self.engine = engine
        self.instance = instance

    @classmethod
    def from_config(cls, config: SandboxConfig) -> FakeBackend:
        return cls(engine_of(config.instance), config.instance)

    def _get(self, handle: SandboxHandle) -> FakeSandbox:
        sandbox = self.engine.sandboxes.get(handle.id)
        if sandbox is None:
            raise SandboxError(f"the sandbox of run {handle.run_id} no longer exists")
        return sandbox

    def _running(self, handle: SandboxHandle) -> FakeSandbox:
        sandbox = self._get(handle)
        if sandbox.status != RUNNING:
            raise SandboxError("the sandbox is not running")
        return sandbox

    # --- a run sandbox's lifecycle ------------------------------------------------------

    def ping(self) -> None:
        return None

    def launch(self, spec: SandboxSpec) -> SandboxHandle:
        if not spec.command:
            raise SandboxError("a sandbox needs a command")
        if spec.image.startswith("fake-task:") and spec.image not in self.engine.images:
            raise SandboxError(f"image {spec.image} is missing")
        labels = {**spec.labels, LABEL_MANAGED: "1", LABEL_RUN_ID: spec.run_id}
        if self.instance:
            labels[LABEL_INSTANCE] = self.instance
        sandbox = FakeSandbox(id=f"fake-{next(_ids)}", spec=spec, labels=labels)
        if spec.workspace is not None:
            data = (
                spec.workspace.read_bytes() if isinstance(spec.workspace, Path) else spec.workspace
            )
            _untar(sandbox, spec.workdir, data)
        sandbox.written = 0
        with self.engine.lock:
            self.engine.sandboxes[sandbox.id] = sandbox
        if spec.command != ["sleep", "infinity"]:
            sandbox.exit_code = self.engine.harness(sandbox)
            sandbox.status = EXITED
        return SandboxHandle(id=sandbox.id, run_id=spec.run_id)

    def stream_logs(self, handle: SandboxHandle) -> Iterator[bytes]:
        sandbox = self._get(handle)
        sent = 0
        while True:
            while sent < len(sandbox.output):
                yield sandbox.output[sent]
                sent += 1
            if sandbox.status != RUNNING:
                return
            time.sleep(0.05)

    def wait(self, handle: SandboxHandle, timeout: float) -> int | None:
        sandbox = self._get(handle)
        if sandbox.status == RUNNING:
            time.sleep(min(timeout, 0.05))
            return None
        return sandbox.exit_code

    def collect(
        self, handle: SandboxHandle, paths: Sequence[str], max_bytes: int
    ) -> dict[str, Collected]:
        sandbox = self._get(handle)
        found = {}
        for path in paths:
            path = posixpath.normpath(path)
            content = sandbox.files.get(path)
            if content is not None:
                fits = len(content) <= max_bytes
                found[path] = Collected(FileKind.FILE, len(content), content if fits else None)
            elif any(name.startswith(f"{path}/") for name in sandbox.files):
                found[path] = Collected(FileKind.DIRECTORY)
            else:
                found[path] = Collected(FileKind.MISSING)
        return found

    def disk_full(self, handle: SandboxHandle) -> bool:
        return False

    def sweep_volumes(self) -> list[str]:
        return []

    def find_install(self, spec: SandboxSpec) -> None:
        return None  # no install cache: every run installs

    def saved_install(self, handle: SandboxHandle) -> None:
        return None

    def sweep_install_cache(self, keep) -> list:
        return []

    def sweep_warm(self) -> list[str]:
        return []  # no warm pool: every sandbox is made when it is launched

    def sweep_gone_instances(self) -> list[str]:
        return []  # an engine per instance (ENGINES): no other instance's sandboxes on it

    def kill(self, handle: SandboxHandle) -> None:
        sandbox = self.engine.sandboxes.get(handle.id)
        if sandbox is not None and sandbox.status == RUNNING:
            sandbox.status, sandbox.exit_code = EXITED, 137

    def remove(self, handle: SandboxHandle) -> None:
        with self.engine.lock:
            self.engine.sandboxes.pop(handle.id, None)

    def _mine(self, sandbox: FakeSandbox, label_filter: Mapping[str, str] | None) -> bool:
        wanted = {
            **(label_filter or {}),
            **({LABEL_INSTANCE: self.instance} if self.instance else {}),
        }
        return all(sandbox.labels.get(key) == value for key, value in wanted.items())

    def list_by_label(self, label_filter: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        return [
            SandboxInfo(run_id=s.labels[LABEL_RUN_ID], id=s.id, status=s.status)
            for s in list(self.engine.sandboxes.values())
            if self._mine(s, label_filter)
        ]

    def list_with_label(
        self, label: str, label_filter: Mapping[str, str] | None = None
    ) -> list[tuple[SandboxInfo, str]]:
        return [
            (SandboxInfo(run_id=s.labels[LABEL_RUN_ID], id=s.id, status=s.status), s.labels[label])
            for s in list(self.engine.sandboxes.values())
            if label in s.labels and self._mine(s, label_filter)
        ]

    def detach(self, handle: SandboxHandle) -> None:
        self._get(handle).detached = True

    # --- the isolation check and the gateway --------------------------------------------

    def runtimes(self) -> set[str]:
        return {"runc", "runsc"}

    def runtime_command(self, name: str) -> list[str] | None:
        return [name] if name in self.runtimes() else None

    def tenants(
        self, *, network: str, organization_of: Callable[[list[str]], Mapping[str, str]]
    ) -> Tenants:
        return MappedTenants()

    # --- task sandboxes -----------------------------------------------------------------

    def image_tag(self, *, context: Path, digest: str, organization: str) -> str:
        return f"fake-task:{organization[:8]}-{digest[:16]}"

    def build_image(
        self,
        *,
        context: Path,
        tag: str,
        like: SandboxSpec,
        timeout: float,
        policy,
        force: bool = False,
    ) -> bool:
        if tag in self.engine.images and not force:
            return True
        with tarfile.open(context, mode="r:*") as tar:
            member = tar.extractfile("Dockerfile")
            assert member is not None
            lines = member.read().decode().splitlines()
        workdirs = [line.split(None, 1)[1] for line in lines if line.upper().startswith("WORKDIR ")]
        image = FakeImage(
            id=f"sha256:fake{next(_ids)}",
            tag=tag,
            workdir=(workdirs or ["/"])[-1],
            made=time.time(),
        )
        self.engine.images[tag] = image
        self.engine.builds.append(tag)
        return False

    def image_workdir(self, image: str) -> str:
        if image not in self.engine.images:
            raise SandboxError(f"no image {image}")
        return self.engine.images[image].workdir

    def built_images(self) -> list[BuiltImage]:
        return [BuiltImage(i.id, [i.tag], i.made) for i in self.engine.images.values()]

    def remove_image(self, image_id: str, tags: Sequence[str]) -> bool:
        if any(s.spec.image in tags for s in self.engine.sandboxes.values()):
            return False
        for tag in tags:
            self.engine.images.pop(tag, None)
        return True

    def written_bytes(self, handles: Sequence[SandboxHandle]) -> dict[str, int]:
        return {
            handle.id: self.engine.sandboxes[handle.id].written
            for handle in handles
            if handle.id in self.engine.sandboxes
        }

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
        sandbox = self._running(handle)
        word, _, rest = command.partition(" ")
        if word == "echo":
            yield {"stream": "stdout", "data": f"{rest}\n"}
            code = 0
        elif word == "cat":
            path = posixpath.join(cwd or sandbox.spec.workdir, rest)
            content = sandbox.files.get(posixpath.normpath(path))
            if content is None:
                yield {"stream": "stderr", "data": f"cat: {rest}: No such file or directory\n"}
            else:
                yield {"stream": "stdout", "data": content.decode()}
            code = 0 if content is not None else 1
        elif word == "exit":
            code = int(rest)
        else:
            yield {"stream": "stderr", "data": f"fake: {word}: command not found\n"}
            code = 127
        yield {"exit_code": code, "timed_out": False}

    def put_files(self, handle: SandboxHandle, *, path: str, chunks: Iterable[bytes]) -> None:
        _untar(self._running(handle), path, b"".join(chunks))

    def open_files(
        self, handle: SandboxHandle, *, path: str, max_bytes: int
    ) -> tuple[int | None, Iterator[bytes]]:
        size = self._path_size(handle, path)
        if size is None or size > max_bytes:
            return size, iter(())
        return size, self._get_files(handle, path=path, max_bytes=max_bytes)

    def _path_size(self, handle: SandboxHandle, path: str) -> int | None:
        sandbox = self._running(handle)
        path = posixpath.normpath(path)
        inside = [c for n, c in sandbox.files.items() if n == path or n.startswith(f"{path}/")]
        return sum(map(len, inside)) if inside else None

    def _get_files(self, handle: SandboxHandle, *, path: str, max_bytes: int) -> Iterator[bytes]:
        sandbox = self._running(handle)
        path = posixpath.normpath(path)
        parent = posixpath.dirname(path)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, content in sorted(sandbox.files.items()):
                if name == path or name.startswith(f"{path}/"):
                    info = tarfile.TarInfo(posixpath.relpath(name, parent))
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
        yield buffer.getvalue()[: max_bytes + (1 << 20)]


def _untar(sandbox: FakeSandbox, directory: str, data: bytes) -> None:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                if member.isfile():
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    sandbox.write(posixpath.join(directory, member.name), extracted.read())
    except tarfile.TarError as exc:
        raise SandboxError(f"could not extract the tar into {directory}: {exc}") from exc
