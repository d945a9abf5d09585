"""The Docker backend's warm pool: sandboxes started ahead of the runs that will use them.

Under gVisor, starting a sandbox costs ~450 ms before any of the run's code runs: most of a
short run's launch → succeeded. So a worker host keeps `size` (BELVEDIR_SANDBOX_WARM)
sandboxes of the default shape (the settings' image, runtime, limits, network and disk
quota: `template`) started, never used. Each has its own quota volume mounted as usual; its
first process is `WAITER`: the interpreter is up, it polls for the go file in its workdir.

A run whose spec has that shape (`fits`) takes one (`WarmPool.take`): it claims it with an
O_EXCL claim file in the pool's folder on this host (two workers never take the same one; the
sweep claims one the same way before it removes it), unpacks its workspace straight into the
sandbox's workdir folder, attaches to its output, and then writes the go file: the run's
environment, never in the container's config (so not in `docker inspect`). The waiter reads
and deletes it before anything else runs, sets the environment and runs the workspace's
entrypoint in the same interpreter, as a cold sandbox's first process does. A warm sandbox
serves one run and is removed with it, like any run sandbox. The pool is filled again once a
run has taken its member (`fill_later`, as soon as that run's sandbox exits or
FILL_AFTER_TAKE_SECONDS after the take: `size` counts unclaimed members, so while runs run the
host holds their sandboxes and `size` more), again after each removal, and by the
reaper's pass (`sweep`), which also removes this engine's stale members: another shape or
image, older than `max_age`, their volume gone, stopped. A launch that finds the pool empty
while a member is being made on this host (`filling`: the filler's `.making-<key>` note names
its process) waits for that member up to FILL_WAIT_SECONDS rather than starting a second
sandbox beside it: back-to-back launches on one host are all warm with a pool of one.

State, in `<data dir>/.warm/` (`Claims`; shared by every pool, engine and platform instance
on the host: a pool's `members` are those of its own key): `<container id>.ready` (what its
maker recorded, JSON, with its instance and engine),
`<container id>.claim` (the run id that took it; "-" for the sweep) and, while a member is
being made, `.making-<pool key>` (the filler's pid and start time), inside the fill's
`.lock-<pool key>` (removed as the fill ends). Pool members carry no
`belvedir.managed` label: nothing that lists run sandboxes sees them until one is claimed
(the backend's `list_by_label` then reports it under its run id). The members of a platform
instance gone from the host are removed by the others (`sandboxes.instances.sweep_gone`).
Pure Python: no Django.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import requests

from sandboxes.base import LABEL_INSTANCE, SANDBOX_GID, SANDBOX_UID, SandboxSpec
from sandboxes.labels import LABEL_WARM, LABEL_WARM_ENGINE
from sandboxes.warmclaims import MAKING_GRACE_SECONDS, SWEEP_CLAIM, Claims, Member, member_at

POOL_DIR = ".warm"
GO_FILE = ".belvedir-go"  # in the workdir; the waiter deletes it before anything runs
# A launch that finds the pool empty while a member is being made on this host waits this long
# for it (polling every TAKE_POLL_SECONDS) before it starts a sandbox of its own: under gVisor on
# 2 busy cores a member takes ~0.5-1 s to make, a cold start as long again beside it.
FILL_WAIT_SECONDS = 1.5
TAKE_POLL_SECONDS = 0.01
# A taken member's successor is started once that run's sandbox exits, or this long after the
# take if it runs on: a short run keeps the CPU to itself (a gVisor start beside it slowed it by
# ~100 ms on 2 busy cores), a long one has a member waiting again a few seconds in.
FILL_AFTER_TAKE_SECONDS = 2.0
# The waiter, run as `python3 -I -S -c WAITER`: it imports what the entrypoint will need
# (ctypes, _sha2, urllib.request: ~0.1 s under gVisor, paid before the run), polls for the
# go file every 20 ms, then runs the entrypoint the workspace brought as `python3 -I -S
# entrypoint.py` would. Measured under gVisor (ptrace): a file the host renames into the
# bind-mounted workdir is seen within ~3 ms; polling costs an idle sandbox 6.3 % of a core
# at 5 ms, 2.6 % at 20 ms, 1.1 % at 50 ms; a SIGUSR1 doorbell through `docker kill` wakes it
# only after ~30 ms (55 ms until the API answers), so the poll alone it is.
WAITER = f"""\
import ctypes, json, os, sys, time
try:
    import _sha2
except ImportError:
    pass
import urllib.request
go = {GO_FILE!r}
while True:
    try:
        with open(go, encoding="utf-8") as f:
            order = json.load(f)
        break
    except (FileNotFoundError, ValueError):
        time.sleep(0.02)
os.unlink(go)
os.environ.update(order["env"])
path = order["entrypoint"]
sys.argv = [path]
with open(path, encoding="utf-8") as f:
    code = compile(f.read(), path, "exec")
exec(code, {{"__name__": "__main__", "__file__": path}})
"""


def shape(spec: SandboxSpec) -> SandboxSpec:
    """What of a spec the pool's sandboxes share: all but the run, its env and workspace (and
    an install snapshot to take: one to start from is no warm sandbox's, `DockerBackend`)."""
    return dataclasses.replace(spec, run_id="", env={}, workspace=None, install_cache=None)


def pool_key(template: SandboxSpec, engine: str) -> str:
    return hashlib.sha256(f"{engine}|{shape(template)!r}".encode()).hexdigest()[:16]


def waiter_spec(template: SandboxSpec, key: str, engine: str) -> SandboxSpec:
    python = template.command[0] if template.command else "/usr/bin/python3"
    return dataclasses.replace(
        shape(template),
        command=[python, "-I", "-S", "-c", WAITER],
        labels={LABEL_WARM: key, LABEL_WARM_ENGINE: engine},
    )


def send_go(workdir: Path, env: dict[str, str], entrypoint: str) -> None:
    """Write the go file into the sandbox's workdir folder (renamed into place: the waiter
    never reads half of it), readable by the sandbox user only."""
    partial = workdir / f"{GO_FILE}.{os.getpid()}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with contextlib.suppress(PermissionError):  # not root (development): mode 0600 stays
            os.fchown(fd, SANDBOX_UID, SANDBOX_GID)
        os.write(fd, json.dumps({"env": env, "entrypoint": entrypoint}).encode())
    finally:
        os.close(fd)
    os.rename(partial, workdir / GO_FILE)


class WarmPool(Claims):
    """This host's warm sandboxes of one engine (see the module's docstring).

    `make(spec)`: start a sandbox of `spec` (the waiter's) and return it as a Member;
    `discard(id)`: kill and remove a member with its volume."""

    def __init__(
        self,
        client: Callable[[], docker.DockerClient],
        *,
        data_dir: Path,
        template: SandboxSpec,
        engine: str,
        size: int,
        max_age: float,
        instance: str | None,
        make: Callable[[SandboxSpec], Member],
        discard: Callable[[str], None],
    ) -> None:
        super().__init__(data_dir / POOL_DIR)
        self._client = client
        self.template = template
        self.engine = engine
        self.size = size
        self.max_age = max_age
        self.instance = instance
        self.key = pool_key(template, f"{engine}|{instance or ''}")
        self._make = make
        self._discard = discard
        # This process's fill thread (`fill_later`): one at a time; a request while it runs is
        # kept (`_wanted`: what to wait for first) and served by it once its fill is done.
        self._fill_state = threading.Lock()
        self._filler = False
        self._wanted: list[Callable[[], None] | None] = []

    def fits(self, spec: SandboxSpec) -> bool:
        return self.size > 0 and spec.workspace is not None and shape(spec) == shape(self.template)

    # --- taking one --------------------------------------------------------------------------

    def take(self, run_id: str, *, wait: float = 0.0) -> Member | None:
        """A running member of this pool, claimed for `run_id`; None when there is none.

        With `wait`, a pool that is empty while a fill is under way on this host (`filling`)
        is watched for up to `wait` s for that member: it is nearer than a cold start, and a
        second gVisor start beside the fill's would slow both on a small host."""
        deadline = time.monotonic() + wait
        while (member := self._take_ready(run_id)) is None:
            if time.monotonic() >= deadline or not self.filling():
                return None
            time.sleep(TAKE_POLL_SECONDS)
        return member

    def filling(self) -> bool:
        """Whether a fill of this pool is making a member on this host now (any process)."""
        try:
            making = json.loads(self._making_path().read_text())
            pid, started = int(making["pid"]), float(making["started"])
        except (OSError, ValueError, TypeError, KeyError):
            return False
        if time.time() - started > MAKING_GRACE_SECONDS:
            return False  # left by a filler killed half-way
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, another user's
        return True

    def _take_ready(self, run_id: str) -> Member | None:
        image_id = ""
        for member in sorted(self.members(), key=lambda m: m.created):
            # A member a run holds keeps its claim file: read, not written and linked again on
            # every poll of a launch that waits for a fill.
            taken = self._path(member.id, "claim").exists()
            if member.key != self.key or taken or not self.claim(member.id, run_id):
                continue
            try:
                image_id = image_id or self._image_id()
                state = self._client().api.inspect_container(member.id)["State"]
                usable = (
                    state.get("Running")
                    and member.image_id == image_id
                    and Path(member.workdir).is_dir()
                )
            except (docker.errors.DockerException, requests.RequestException):
                usable = False
            if usable:
                return member
            try:
                self.remove(member.id)
            except Exception:  # the run starts cold all the same; the sweep removes it (no record)
                continue
        return None

    def members(self) -> list[Member]:
        """This pool's members as their makers recorded them (not other instances' or
        engines' pools sharing the host's folder)."""
        return [member for member in self.records() if member.key == self.key]

    def remove(self, container_id: str) -> None:
        try:
            self._discard(container_id)
        finally:
            self.forget(container_id)

    # --- filling and sweeping ------------------------------------------------------------------

    def fill(self, *, queue: bool = False) -> list[str]:
        """Start members until `size` unclaimed ones of this pool are ready (one process at a
        time per pool: others return at once, or with `queue` fill once it is done); the ids
        started. Never raises: an empty pool only means cold starts."""
        made: list[str] = []
        if self.size < 1:
            return made
        with self._fill_lock(block=queue) as locked:
            if not locked:
                return made
            try:
                while self._unclaimed() < self.size and len(made) < self.size:
                    self._write_making()
                    try:
                        member = self._make(waiter_spec(self.template, self.key, self.engine))
                    except Exception:  # the next fill tries again
                        break
                    self._write_ready(member)
                    made.append(member.id)
            finally:
                self._making_path().unlink(missing_ok=True)
        return made

    def fill_later(self, after: Callable[[], None] | None = None) -> None:
        """`fill` in a thread of its own (once `after` returns). While this process's fill
        thread is busy, the request is left to it: it fills again once its fill is done (a
        member taken as that fill ended would otherwise wait for the next removal or sweep)."""
        if self.size < 1:
            return
        with self._fill_state:
            if self._filler:
                self._wanted.append(after)
                return
            self._filler = True

        def run() -> None:
            wait = after
            try:
                while True:
                    if wait is not None:
                        wait()
                    # Behind another process's fill if need be: that one stops after `size`
                    # members, so a member taken as it made them would wait for the next sweep.
                    self.fill(queue=True)
                    with self._fill_state:
                        wanted, self._wanted = self._wanted, []
                        if not wanted:
                            self._filler = False
                            return
                    # A removal's request fills at once; takes' wait for the last of their runs.
                    wait = None if None in wanted else wanted[-1]
            except BaseException:
                with self._fill_state:  # the next request starts a thread again
                    self._filler = False
                raise

        threading.Thread(target=run, daemon=True, name="warm-fill").start()

    def sweep(self) -> list[str]:
        """Remove this engine's stale members (another shape or image, older than max_age,
        stopped, their volume gone) and the state of members that are gone; then fill. The
        ids removed. Members claimed by a run are the run's: the reaper removes them with it."""
        removed: list[str] = []
        containers = {item["Id"]: item for item in self._listed()}
        self._forget_gone(set(containers))
        now = time.time()
        image_id = ""
        for cid, item in containers.items():
            owner = self.claimed_by(cid)
            if owner == SWEEP_CLAIM or (owner == "" and self._abandoned(cid)):
                self._remove_quietly(cid, removed)  # an earlier removal or claim cut short
                continue
            if owner is not None:
                continue
            member = self._read_ready(cid)
            labels = item.get("Labels") or {}
            if member is None and now - item.get("Created", 0) < MAKING_GRACE_SECONDS:
                continue  # still being made
            try:
                image_id = image_id or self._image_id()
            except (docker.errors.DockerException, requests.RequestException):
                return removed  # the engine is not answering: nothing is judged stale
            stale = (
                member is None
                or labels.get(LABEL_WARM) != self.key
                or member.image_id != image_id
                or now - member.created > self.max_age
                or item.get("State") != "running"
                or not Path(member.workdir).is_dir()
                or self.size < 1
            )
            if stale and self.claim(cid, SWEEP_CLAIM):
                self._remove_quietly(cid, removed)
        self.fill()
        return removed

    def drain(self) -> list[str]:
        """Remove every member of this engine's pool no run has taken (a host taken out of
        service, a benchmark's end, a run that needs their disk); the ids removed."""
        removed: list[str] = []
        listed = self._listed()
        self._forget_gone({item["Id"] for item in listed})
        for item in listed:
            owner = self.claimed_by(item["Id"])
            if (
                owner == SWEEP_CLAIM
                or (owner == "" and self._abandoned(item["Id"]))
                or (owner is None and self.claim(item["Id"], SWEEP_CLAIM))
            ):
                self._remove_quietly(item["Id"], removed)
        return removed

    def _forget_gone(self, listed: set[str]) -> None:
        """Forget this pool's records of members that are gone (not in `listed`, this engine's
        containers of this instance, listed before: a member younger may not be listed yet)."""
        for member in self.members():
            young = time.time() - member.created < MAKING_GRACE_SECONDS
            if member.id not in listed and not young:
                self.forget(member.id)

    def _remove_quietly(self, container_id: str, removed: list[str]) -> None:
        try:
            self._discard(container_id)
        except Exception:  # the next sweep tries again: its claim stays
            return
        self.forget(container_id)
        removed.append(container_id)

    def listed_claimed(self, labels: dict[str, str]) -> Iterator[tuple[str, dict]]:
        """(run id, the engine's listing) of this engine's members claimed by a run and
        matching `labels`."""
        if not self.dir.is_dir():
            return
        for item in self._listed(labels):
            owner = self.claimed_by(item["Id"])
            if owner and owner != SWEEP_CLAIM:
                yield owner, item

    # --- internals -----------------------------------------------------------------------------

    def _listed(self, labels: dict[str, str] | None = None) -> list[dict]:
        wanted = {**(labels or {}), LABEL_WARM_ENGINE: self.engine}
        if self.instance:
            wanted[LABEL_INSTANCE] = self.instance
        filters = {"label": [f"{k}={v}" for k, v in wanted.items()]}
        return self._client().api.containers(all=True, filters=filters)

    def _image_id(self) -> str:
        return self._client().images.get(self.template.image).id

    def _unclaimed(self) -> int:
        return sum(1 for m in self.members() if m.key == self.key and self.claimed_by(m.id) is None)

    def _read_ready(self, container_id: str) -> Member | None:
        return member_at(self._path(container_id, "ready"))

    def _making_path(self) -> Path:
        return self.dir / f".making-{self.key}"

    def _write_making(self) -> None:
        """Tell launches on this host that a member is on its way (`filling`)."""
        partial = self.dir / f".making-{self.key}.{os.getpid()}"
        partial.write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
        os.rename(partial, self._making_path())

    def _write_ready(self, member: Member) -> None:
        partial = self._path(member.id, f"ready.{os.getpid()}")
        partial.write_text(json.dumps(dataclasses.asdict(member)))
        os.rename(partial, self._path(member.id, "ready"))

    @contextlib.contextmanager
    def _fill_lock(self, *, block: bool = False) -> Iterator[bool]:
        """One filler per pool (another engine's or instance's pool fills meanwhile): False
        while another holds it, unless `block` (then once it lets go). Its lock file is removed
        by the holder as it lets go (none is left per pool key), so a lock taken on a file that
        is no longer at its path counts for nothing: taken again."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.dir / f".lock-{self.key}"
        while True:
            with open(path, "a") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX if block else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield False
                    return
                try:
                    current = os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino
                except FileNotFoundError:
                    current = False
                if not current:
                    continue  # its holder removed it as we opened it
                try:
                    yield True
                finally:
                    path.unlink(missing_ok=True)
                return
