"""The install cache: a snapshot of a sandbox's quota volume taken right after its install.

A run whose install command succeeded leaves, on the worker host that ran it, a sparse copy
of its quota volume's image (`sandboxes.diskquota`): the workspace with the repo and whatever
the install wrote there, the venv, the home, /tmp. A later run with the same key starts
from a sparse copy of that snapshot instead of the empty template, and skips its install.

The key (`full_key`) is the caller's (`InstallCache.key`: the organization, the harness, the
resolved commit, the install command, the harness env with every value hashed) folded with
what only the engine knows or the spec says: the image's id, the runtime, the limits, the
disk size, the workdir, the user, a GPU. Anything different is another key.

Layout under the sandbox data dir (BELVEDIR_SANDBOX_DATA_DIR), one cache folder per platform
instance (`cache_dir`: instances sharing a host never sweep each other's):

    .install-cache/<instance>/<organization>/<key>.img    the snapshot (sparse)
    .install-cache/<instance>/<organization>/<key>.json   who made it and when ({"run_id",
                                                          "made"}); its modification time
                                                          is the last use (LRU)
    .install-cache/<instance>/.saving-*                   a snapshot being copied

One folder per organization: a snapshot is only ever looked up under the organization of
the run asking. The host's snapshots (every instance's) keep within `budget` bytes of its disk
(what the images really take: they are sparse): a new snapshot first evicts the least recently used
until it fits, is not kept when it alone is larger, nor when the disk would keep less than
its reserve with every quota volume full (`diskquota.check_room`'s rule). Pure Python.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandboxes import diskquota

CACHE_DIR = ".install-cache"
SAVING_PREFIX = ".saving-"
SAVING_GRACE_SECONDS = 600  # a copy older than this was left by a killed worker
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_KEY = re.compile(r"^[0-9a-f]{64}$")


class InstallCacheError(Exception):
    """A snapshot could not be taken or used; the message is fit to show."""


@dataclass(frozen=True)
class InstallCache:
    """A sandbox's part in the install cache (`SandboxSpec.install_cache`).

    `organization`: whose cache; `key`: the caller's half of the key; `restore`: start from
    the snapshot (else take one after the install); `marker`: what the entrypoint writes in
    `marker_file` (under the workdir) once its install succeeded, the signal to take it;
    `resume_file`: what the engine writes once it is taken (or given up), for the sandbox to
    go on; `drop`: folders under the workdir a restored workspace loses before the new
    workspace is unpacked (the control files of the run that made it)."""

    organization: str
    key: str
    restore: bool = False
    marker: str = ""
    marker_file: str = ".belvedir/installed"
    resume_file: str = ".belvedir/resume"
    drop: tuple[str, ...] = (".belvedir",)


@dataclass(frozen=True)
class Snapshot:
    """One snapshot on this host."""

    organization: str
    key: str
    image: Path
    bytes: int  # what it takes on the host's disk
    run_id: str  # the run that made it
    made: float  # when (Unix time)
    used: float  # when last made or restored


def cache_dir(data_dir: Path, instance: str | None) -> Path:
    """The cache folder of a platform instance on the host whose data dir is `data_dir`."""
    return data_dir / CACHE_DIR / hashlib.sha256((instance or "").encode()).hexdigest()[:16]


def full_key(base: str, *, image_id: str, shape: object) -> str:
    """The key a snapshot is stored under: the caller's `base`, the image's id, the shape."""
    return hashlib.sha256(f"{base}|{image_id}|{shape!r}".encode()).hexdigest()


def _folder(root: Path, organization: str) -> Path:
    if not _NAME.match(organization):
        raise InstallCacheError(f"{organization!r} is not a valid organization for the cache")
    return root / organization


def _paths(root: Path, organization: str, key: str) -> tuple[Path, Path]:
    if not _KEY.match(key):
        raise InstallCacheError(f"{key!r} is not an install cache key")
    folder = _folder(root, organization)
    return folder / f"{key}{diskquota.IMAGE_SUFFIX}", folder / f"{key}.json"


def find(root: Path, organization: str, key: str) -> Snapshot | None:
    """The organization's snapshot of `key` on this host; None when there is none."""
    image, meta = _paths(root, organization, key)
    try:
        info = json.loads(meta.read_text())
        st, used = image.stat(), meta.stat().st_mtime
    except (OSError, ValueError):
        return None
    return Snapshot(
        organization=organization,
        key=key,
        image=image,
        bytes=st.st_blocks * 512,
        run_id=str(info.get("run_id", "")),
        made=float(info.get("made", 0)),
        used=used,
    )


def touch(snapshot: Snapshot) -> None:
    """Mark it used now (the LRU order)."""
    with contextlib.suppress(OSError):
        os.utime(snapshot.image.with_suffix(".json"))


def snapshots(root: Path) -> list[Snapshot]:
    """Every snapshot in the cache folder `root`, least recently used first."""
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if not folder.is_dir() or not _NAME.match(folder.name):
            continue
        for meta in folder.glob("*.json"):
            if _KEY.match(meta.stem) and (got := find(root, folder.name, meta.stem)):
                found.append(got)
    return sorted(found, key=lambda s: (s.used, s.key))


def total_bytes(root: Path) -> int:
    return sum(s.bytes for s in snapshots(root))


def remove(snapshot: Snapshot) -> None:
    """Delete a snapshot (its record first: a half-removed one is never found), and its
    organization's folder with the last of its snapshots (a save puts it back: `_move_in`)."""
    snapshot.image.with_suffix(".json").unlink(missing_ok=True)
    snapshot.image.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another snapshot of it is there, or a save made it
        snapshot.image.parent.rmdir()


def _move_in(partial: Path, image: Path) -> None:
    """The finished copy to its place, the organization's folder made again where the last
    of its snapshots was removed meanwhile (this save's eviction, another worker's)."""
    for attempt in range(3):
        image.parent.mkdir(exist_ok=True, mode=0o700)
        try:
            os.replace(partial, image)
            return
        except FileNotFoundError:
            if attempt == 2 or not partial.exists():
                raise


def host_snapshots(root: Path) -> list[Snapshot]:
    """Every snapshot on the host of the cache folder `root`: of every platform instance's
    cache folder beside it, least recently used first (the budget is the host's)."""
    if not root.parent.is_dir():
        return []
    folders = [root, *(p for p in root.parent.iterdir() if p.is_dir() and p != root)]
    listed = [s for folder in folders if folder.is_dir() for s in snapshots(folder)]
    return sorted(listed, key=lambda s: (s.used, s.key))


def evict(root: Path, *, budget: int, room_for: int = 0) -> list[Snapshot]:
    """Remove the host's least recently used snapshots (`host_snapshots`) until they and
    `room_for` more bytes fit in `budget`; those removed."""
    removed = []
    listed = host_snapshots(root)
    total = sum(s.bytes for s in listed)
    for snapshot in listed:
        if total + room_for <= budget:
            break
        remove(snapshot)
        removed.append(snapshot)
        total -= snapshot.bytes
    return removed


def _freeze(mountpoint: Path, *, frozen: bool) -> None:
    """fsfreeze the volume (every write waits, everything written is on its image) or thaw
    it; without fsfreeze, a sync of that filesystem."""
    args = ["fsfreeze", "--freeze" if frozen else "--unfreeze", str(mountpoint)]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        done = None
    if done is None or done.returncode != 0:
        if not frozen:
            return
        fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.syncfs(fd) if hasattr(os, "syncfs") else os.sync()
        finally:
            os.close(fd)


def save(
    root: Path,
    cache: InstallCache,
    key: str,
    *,
    volume: diskquota.QuotaVolume,
    data_dir: Path,
    run_id: str,
    budget: int,
    reserve_bytes: int,
) -> Snapshot:
    """Snapshot `volume` (mounted, its sandbox waiting; under `data_dir`) as the organization's
    `key` in the cache folder `root`.

    Evicts least recently used snapshots to make room within `budget`; InstallCacheError
    (nothing kept) when it alone is larger, or the disk would keep less than `reserve_bytes`
    free with every quota volume full and the snapshot on it."""
    image, meta = _paths(root, cache.organization, key)
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f"{SAVING_PREFIX}{secrets.token_hex(6)}{diskquota.IMAGE_SUFFIX}"
    _freeze(volume.mountpoint, frozen=True)  # all of it on its image: its size is known
    try:
        needed = volume.host_bytes()
        if needed > budget:
            raise InstallCacheError(
                f"the install's {needed:,} bytes are over the cache's budget of {budget:,} "
                "(BELVEDIR_INSTALL_CACHE_BYTES)"
            )
        evict(root, budget=budget, room_for=needed)
        free = diskquota.free_disk_bytes(data_dir)
        if free - diskquota.committed_bytes(root=data_dir) - needed < reserve_bytes:
            raise InstallCacheError(
                "the worker's disk would keep less than its reserve (BELVEDIR_MIN_FREE_DISK) "
                "with the snapshot on it"
            )
        copy(volume.image, partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        _freeze(volume.mountpoint, frozen=False)
    try:
        meta.unlink(missing_ok=True)  # another run's snapshot of the key: replaced whole
        _move_in(partial, image)
        meta.write_text(json.dumps({"run_id": run_id, "made": time.time()}))
    finally:
        partial.unlink(missing_ok=True)  # (gone once replaced)
    found = find(root, cache.organization, key)
    if found is None:
        raise InstallCacheError("the snapshot vanished as it was made")
    evict(root, budget=budget)  # another worker's snapshot may have landed meanwhile
    return found


def copy(source: Path, dest: Path) -> None:
    """A sparse copy (only the written blocks), mode 0600."""
    try:
        done = subprocess.run(
            ["cp", "--sparse=always", "--reflink=auto", str(source), str(dest)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallCacheError(f"could not copy the install snapshot: {exc}") from exc
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InstallCacheError(f"could not copy the install snapshot: {reason[:300]}")
    os.chmod(dest, 0o600)


def sweep(
    root: Path, *, budget: int, keep: Callable[[Snapshot], bool] | None = None
) -> list[Snapshot]:
    """Remove the snapshots `keep` says no to (their record is gone: cleared, or the harness
    deleted), copies left half-made by a killed worker, and the least recently used over
    `budget`; the snapshots removed."""
    removed = []
    for partial in root.glob(f"{SAVING_PREFIX}*") if root.is_dir() else []:
        with contextlib.suppress(OSError):
            if time.time() - partial.stat().st_mtime > SAVING_GRACE_SECONDS:
                partial.unlink()
    for snapshot in snapshots(root):
        if keep is not None and not keep(snapshot):
            remove(snapshot)
            removed.append(snapshot)
    return removed + evict(root, budget=budget)


def clear(root: Path, organization: str) -> list[Snapshot]:
    """Remove every snapshot of the organization on this host."""
    gone = [s for s in snapshots(root) if s.organization == organization]
    for snapshot in gone:
        remove(snapshot)
    return gone
