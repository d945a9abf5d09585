"""The Docker backend's install cache (`sandboxes.installcache`): a sandbox started from an
install snapshot, and the snapshot taken after a sandbox's install. Mixed into `DockerBackend`.

Taking one: the spec asks for it (`install_cache`, not `restore`); once the sandbox started,
a thread of the worker watches its workdir folder on this host for the entrypoint's signed
`installed` marker (read without following a symlink, `hostfiles.read_file`). Then the
sandbox waits; its quota volume is frozen, copied sparse into the cache (within the budget,
evicting the least recently used), thawed, and the resume file written (opened without
following a symlink anywhere on the way): the run command starts. Anything else, the marker
absent or not the one expected (the install failed, or the harness wrote one itself), takes
nothing. Starting from one: the volume is a sparse copy of the snapshot instead of the empty
template, never a warm sandbox or a spare, and the copied workspace loses the control files
of the run that made it before the new run's are unpacked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker

from sandboxes import diskquota, hostfiles, installcache, volumes
from sandboxes.base import SANDBOX_GID, SANDBOX_UID, SandboxError, SandboxHandle, SandboxSpec
from sandboxes.engine import docker_errors
from sandboxes.installcache import Snapshot

log = logging.getLogger("sandboxes.docker")
WATCH_SECONDS = 0.02  # how often the install's end is looked for (a cold run's install only)
SAVED_WAIT_SECONDS = 600.0  # `saved_install` waits this long for a snapshot being copied


class DockerInstalls:
    """Mixed into `DockerBackend`, which gives the client, the data dir, the reserve, the
    budget (`install_cache_bytes`) and its records of each sandbox's volume and workdir."""

    client: docker.DockerClient
    data_dir: Path | None
    instance: str | None
    reserve_bytes: int
    install_cache_bytes: int
    _volumes: dict[str, str]
    _workdirs: dict[str, tuple[str, Path]]
    _saves: dict[str, tuple[threading.Thread, list[Snapshot | None], threading.Event]]
    _restored: dict[str, tuple[SandboxSpec, Path]]
    spare_volumes: int
    instance: str | None

    def _cache_root(self, spec: SandboxSpec) -> Path | None:
        if spec.install_cache is None or not spec.disk_bytes or self.install_cache_bytes <= 0:
            return None
        return self._cache_dir()

    def _cache_dir(self) -> Path | None:
        if self.data_dir is None:
            return None
        return installcache.cache_dir(self.data_dir, self.instance)

    def install_key(self, spec: SandboxSpec) -> str:
        """The key a snapshot of `spec`'s install is kept under on this host."""
        assert spec.install_cache is not None
        with docker_errors(f"inspect the image {spec.image}"):
            image_id = self.client.images.get(spec.image).id
        shape = (spec.workdir, spec.cpus, spec.memory, spec.pids, spec.runtime, spec.disk_bytes)
        shape += (spec.user, bool(spec.gpu_device), spec.network, spec.cap_add)
        return installcache.full_key(spec.install_cache.key, image_id=image_id, shape=shape)

    def find_install(self, spec: SandboxSpec) -> Snapshot | None:
        root = self._cache_root(spec)
        if root is None:
            return None
        assert spec.install_cache is not None
        return installcache.find(root, spec.install_cache.organization, self.install_key(spec))

    def _install_source(self, spec: SandboxSpec) -> Path | None:
        """The snapshot a restoring spec's volume starts from (None for any other spec)."""
        if spec.install_cache is None or not spec.install_cache.restore:
            return None
        found = self.find_install(spec)
        if found is None:
            raise SandboxError("the install snapshot this run was to start from is gone")
        installcache.touch(found)
        self._restored[spec.run_id] = (spec, found.image)  # by container id once it has one
        return found.image

    def _drop_restored(self, spec: SandboxSpec, mounts: dict[str, dict[str, str]]) -> None:
        """A restored workspace loses its old control files (the new ones come next); a
        symlink or a file there is unlinked, never followed."""
        assert spec.install_cache is not None
        folder = next(Path(src) for src, m in mounts.items() if m["bind"] == spec.workdir)
        for name in spec.install_cache.drop:
            path = folder / name
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(mode):
                shutil.rmtree(path)  # fd-based: it never follows a symlink inside
            else:
                path.unlink()

    def _watch_install(self, handle: SandboxHandle, spec: SandboxSpec) -> None:
        """Start the thread that snapshots the install once the entrypoint says it is done."""
        if spec.run_id in self._restored:
            self._restored[handle.id] = self._restored.pop(spec.run_id)
        cache = spec.install_cache
        if self._cache_root(spec) is None or cache is None or cache.restore or not cache.marker:
            return
        workdir, volume = self._workdirs.get(handle.id), self._volumes.get(handle.id)
        if workdir is None or not volume:
            return
        try:
            key = self.install_key(spec)
        except SandboxError as exc:
            log.warning("run %s: no install snapshot: %s", spec.run_id, exc)
            return
        result: list[Snapshot | None] = []
        ended = threading.Event()  # set: the sandbox ended, no marker will come now
        thread = threading.Thread(
            target=self._take_install,
            args=(handle, spec, key, workdir[1], volume, result, ended),
            daemon=True,
            name=f"install cache {spec.run_id}",
        )
        self._saves[handle.id] = (thread, result, ended)
        thread.start()

    def _take_install(
        self,
        handle: SandboxHandle,
        spec: SandboxSpec,
        key: str,
        folder: Path,
        name: str,
        result: list[Snapshot | None],
        ended: threading.Event,
    ) -> None:
        assert spec.install_cache is not None and self.data_dir is not None
        cache = spec.install_cache
        try:
            while handle.id in self._workdirs and not ended.is_set():  # while it may come
                found = hostfiles.read_file(folder, cache.marker_file, 4096)
                content = found.content if found is not None else None
                if content is not None and content.strip() == cache.marker.encode():
                    break  # the entrypoint's own (anything else is not: looked at again)
                ended.wait(WATCH_SECONDS)
            else:
                return
            volume = diskquota.QuotaVolume(
                name=name,
                image=self.data_dir / f"{name}{diskquota.IMAGE_SUFFIX}",
                mountpoint=self.data_dir / name,
                size_bytes=spec.disk_bytes or 0,
            )
            began = time.monotonic()
            try:
                result.append(
                    installcache.save(
                        installcache.cache_dir(self.data_dir, self.instance),
                        cache,
                        key,
                        volume=volume,
                        data_dir=self.data_dir,
                        run_id=spec.run_id,
                        budget=self.install_cache_bytes,
                        reserve_bytes=self.reserve_bytes,
                    )
                )
                took = (time.monotonic() - began) * 1000
                log.info("run %s: its install was snapshotted (%.0f ms)", spec.run_id, took)
            except (installcache.InstallCacheError, OSError) as exc:
                log.info("run %s: its install is not cached: %s", spec.run_id, exc)
            finally:
                _resume(folder, cache.resume_file)
            if result:  # the next run of this key: its volume copied ahead, while hot
                self._make_install_spare(spec, result[0].image)
        except Exception:  # a thread of its own: never let it die silently
            log.exception("run %s: the install snapshot failed", spec.run_id)

    def _make_install_spare(self, spec: SandboxSpec, source: Path) -> None:
        """A spare volume copied from the snapshot `source` for the next run of its key (with
        spare volumes on: BELVEDIR_SANDBOX_SPARE_VOLUMES), swept like any spare when unused;
        the instance keeps one such copy on the host, the latest."""
        if self.spare_volumes < 1 or self.data_dir is None or not spec.disk_bytes:
            return
        # One at a time per instance: an older snapshot's copy (its key's last run, or a
        # snapshot since replaced) gives its disk to this one.
        for name in diskquota.copied_spares(root=self.data_dir, owner=self.instance or ""):
            if diskquota.claim_spare(root=self.data_dir, name=name):
                volumes.release(self.data_dir, name)
        made = volumes.make_spare(
            self.client,
            image=spec.image,
            workdir=spec.workdir,
            data_dir=self.data_dir,
            size_bytes=spec.disk_bytes,
            reserve_bytes=self.reserve_bytes,
            keep=1,
            owner=self.instance or "",
            source=source,
        )
        log.info("run %s: %s", spec.run_id, f"spare {made} copied from its install snapshot"
                 if made else "no spare copied from its install snapshot (one is ready, or no "
                 "room on the disk, or another spare is being made)")  # fmt: skip

    def _forget_install(self, container_id: str) -> None:
        """A sandbox was removed: its snapshot no longer awaited; after a restored one, a
        spare for its key's next run."""
        saving = self._saves.pop(container_id, None)
        if saving is not None:
            saving[2].set()
        restored = self._restored.pop(container_id, None)
        if restored is not None and restored[1].exists():
            self._make_install_spare(*restored)

    def saved_install(self, handle: SandboxHandle) -> Snapshot | None:
        thread, result, ended = self._saves.pop(handle.id, (None, [], None))
        if thread is not None and ended is not None:
            ended.set()  # a snapshot under way is finished first
            thread.join(timeout=SAVED_WAIT_SECONDS)
        return result[0] if result else None

    def sweep_install_cache(self, keep: Callable[[Snapshot], bool]) -> list[Snapshot]:
        root = self._cache_dir()
        if root is None:
            return []
        try:
            return installcache.sweep(root, budget=self.install_cache_bytes, keep=keep)
        except (installcache.InstallCacheError, OSError) as exc:
            raise SandboxError(f"could not sweep the install cache: {exc}") from exc


def _resume(folder: Path, relative: str) -> None:
    """Create `folder`/`relative` for the sandbox user, following no symlink on the way."""
    *parents, leaf = relative.split("/")
    fds = [os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)]
    try:
        for part in parents:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fd = os.open(
            leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fds[-1]
        )
        with contextlib.suppress(PermissionError):
            os.fchown(fd, SANDBOX_UID, SANDBOX_GID)
        os.close(fd)
    except OSError as exc:
        log.info("could not tell the sandbox to go on after its install: %s", exc)
    finally:
        for fd in fds:
            os.close(fd)
