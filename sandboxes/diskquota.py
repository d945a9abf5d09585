"""Per-sandbox disk quotas: a sparse ext4 image, loop-mounted, its folders bind-mounted in.

A sandbox's container runs with a read-only root filesystem; the only places it can write
(the workdir, /tmp, /var/tmp, the sandbox user's home, the venv) are folders of one small
filesystem made for that sandbox alone. The filesystem lives in a sparse image file of
`size_bytes` bytes, so it costs the host only what the sandbox really writes, and the
sandbox can never write more than `size_bytes` in total: past that, it gets ENOSPC.

Layout under `root` (BELVEDIR_SANDBOX_DATA_DIR, e.g. /var/lib/belvedir/sandboxes):

    <name>.img    the sparse image file
    <name>/       its mount point; <name>/<folder>/ are the sandbox's writable places
    .templates/   one formatted image per layout (size, folders, their seeds, owner), its
                  folders made and seeded: a new volume starts as a sparse copy of it (about
                  0.1 s, where formatting and copying the seeds in took 0.2-0.8 s per run)
    .spares/      a file per spare volume ready for the next sandbox: a volume of a
                  layout made ahead (`make_spare`, named spare-<layout key>-<random>),
                  copied and mounted, taken whole by `take_spare` (another 0.1-0.4 s off a
                  run's start); whoever removes the file first has the spare. It holds
                  the platform instance that made it (`spare_owner`)

Pure Python (no Django). `allocate` and `release` need root (mkfs, mount, umount, chown).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

IMAGE_SUFFIX = ".img"
# No journal (the filesystem lives as long as one run), no reserved blocks, lazily
# initialised inode tables: unwritten parts of a sparse file already read as zeros.
MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal"]
MKFS += ["-E", "lazy_itable_init=1,nodiscard"]
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,noinit_itable"
MIN_SIZE = 16 * 1024 * 1024
TEMPLATES = ".templates"
SPARES = ".spares"
SPARE_PREFIX = "spare-"
COPIED_MARK = "c"  # a spare copied from an image (an install snapshot): spare-<key>-c<random>
# What a full filesystem leaves free: a writer that hit ENOSPC leaves less than this.
FULL_SLACK_BYTES = 4 * 1024 * 1024
NO_SPACE_TEXT = os.strerror(errno.ENOSPC)  # "No space left on device"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_TIMEOUT = 60


class DiskQuotaError(Exception):
    """A quota volume could not be made, checked or released; the message is fit to show."""


class NoRoom(DiskQuotaError):
    """The host's disk cannot keep its reserve with one more volume (`check_room`).
    `later`: whether it could, once the other volumes were released."""

    def __init__(self, message: str, *, later: bool = True):
        super().__init__(message)
        self.later = later


@dataclass(frozen=True)
class Folder:
    """One writable place: its mode, and a host folder whose content is copied in first."""

    mode: int = 0o755
    seed: Path | None = None


@dataclass(frozen=True)
class Usage:
    total: int
    used: int
    free: int
    free_inodes: int


@dataclass(frozen=True)
class QuotaVolume:
    """A mounted quota filesystem: `folder(name)` is the host path to bind-mount."""

    name: str
    image: Path
    mountpoint: Path
    size_bytes: int

    def folder(self, name: str) -> Path:
        return self.mountpoint / name

    def usage(self) -> Usage:
        """Space and inodes of the mounted filesystem, as the sandbox sees them."""
        try:
            st = os.statvfs(self.mountpoint)
        except OSError as exc:
            raise DiskQuotaError(f"could not read the disk usage of {self.name}: {exc}") from exc
        total = st.f_blocks * st.f_frsize
        free = st.f_bavail * st.f_frsize
        return Usage(
            total=total, used=total - st.f_bfree * st.f_frsize, free=free, free_inodes=st.f_favail
        )

    def is_full(self) -> bool:
        """Whether the sandbox ran out of space (or of inodes) on it."""
        usage = self.usage()
        return usage.free < FULL_SLACK_BYTES or usage.free_inodes == 0

    def host_bytes(self) -> int:
        """How much of the host's disk the sparse image really takes."""
        try:
            return self.image.stat().st_blocks * 512
        except FileNotFoundError:
            return 0


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise DiskQuotaError(f"{name!r} is not a valid sandbox volume name")


def _paths(root: Path, name: str) -> tuple[Path, Path]:
    _check_name(name)
    return root / f"{name}{IMAGE_SUFFIX}", root / name


def _run(args: list[str], what: str) -> None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=_TIMEOUT)
    except FileNotFoundError as exc:
        raise DiskQuotaError(f"could not {what}: {args[0]} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise DiskQuotaError(f"could not {what}: {args[0]} took over {_TIMEOUT} s") from exc
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["failed"]
        raise DiskQuotaError(f"could not {what}: {reason[0][:300]}")


def is_mounted(path: Path) -> bool:
    """Whether `path` is a mount point (read from /proc/self/mounts, so it never blocks)."""
    target = os.path.realpath(path)
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 1 and _unescape(fields[1]) == target:
                return True
    return False


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def allocate(
    *,
    root: Path,
    name: str,
    size_bytes: int,
    folders: Mapping[str, Folder],
    uid: int,
    gid: int,
    source: Path | None = None,
) -> QuotaVolume:
    """Make, format and mount a `size_bytes` volume; make `folders` in it, owned by uid:gid.
    `source`: an image of that layout to start from instead (an install snapshot).

    A half-made volume is released again before the error is raised.
    """
    if os.geteuid() != 0:
        raise DiskQuotaError("sandbox disk quotas need root (mkfs, mount)")
    if size_bytes < MIN_SIZE:
        raise DiskQuotaError(f"a sandbox disk must be at least {MIN_SIZE} bytes, not {size_bytes}")
    image, mountpoint = _paths(root, name)
    for folder in folders:
        _check_name(folder)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if image.exists() or mountpoint.exists():
        raise DiskQuotaError(f"a sandbox volume named {name} already exists")
    volume = QuotaVolume(name=name, image=image, mountpoint=mountpoint, size_bytes=size_bytes)
    template = source or _template(
        root=root, size_bytes=size_bytes, folders=folders, uid=uid, gid=gid
    )
    try:
        with open(image, "xb"):
            pass  # claimed: cp fills it
        os.chmod(image, 0o600)
        _run(["cp", "--sparse=always", str(template), str(image)], "copy the sandbox disk")
        mountpoint.mkdir(mode=0o700)
        _run(["mount", "-o", MOUNT_OPTIONS, str(image), str(mountpoint)], "mount the sandbox disk")
    except BaseException:
        try:
            release(root=root, name=name)
        except DiskQuotaError:
            pass  # the first error is the one worth reporting; the reaper retries
        raise
    return volume


def _template(
    *, root: Path, size_bytes: int, folders: Mapping[str, Folder], uid: int, gid: int
) -> Path:
    """The formatted image new volumes of this layout are copied from, made on first use.

    Its key covers everything in it: the size, the format options, each folder's name, mode
    and seed (the seed folder's path and modification time), the owner."""
    key = _layout_key(size_bytes=size_bytes, folders=folders, uid=uid, gid=gid)
    template = root / TEMPLATES / f"{key}{IMAGE_SUFFIX}"
    if template.is_file():
        return template
    template.parent.mkdir(mode=0o700, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".making-", dir=template.parent))
    image, mountpoint = work / f"template{IMAGE_SUFFIX}", work / "mnt"
    try:
        with open(image, "xb") as handle:
            handle.truncate(size_bytes)  # sparse: no block is written yet
        os.chmod(image, 0o600)
        _run([*MKFS, "-L", "belvedir", str(image)], "format the sandbox disk")
        mountpoint.mkdir(mode=0o700)
        _run(["mount", "-o", MOUNT_OPTIONS, str(image), str(mountpoint)], "mount the sandbox disk")
        try:
            os.chmod(mountpoint, 0o755)
            shutil.rmtree(mountpoint / "lost+found", ignore_errors=True)
            for folder_name, folder in folders.items():
                path = mountpoint / folder_name
                path.mkdir()
                if folder.seed is not None:
                    _run(["cp", "-a", "--", f"{folder.seed}/.", str(path)], f"seed {folder_name}")
                os.chown(path, uid, gid)
                os.chmod(path, folder.mode)
        finally:
            try:
                _run(["umount", str(mountpoint)], "unmount the sandbox disk template")
            except DiskQuotaError:
                _run(["umount", "-l", str(mountpoint)], "unmount the sandbox disk template")
        os.rename(image, template)  # whole or not at all; another worker's copy is the same
    finally:
        if not is_mounted(mountpoint):
            shutil.rmtree(work, ignore_errors=True)
    return template


def _layout_key(
    *,
    size_bytes: int,
    folders: Mapping[str, Folder],
    uid: int,
    gid: int,
    source: Path | None = None,
) -> str:
    """What a volume's layout is known by: its size, the format options, each folder's name,
    mode and seed (the seed folder's path and modification time), the owner; and the image it
    was copied from, if not the template (its path and modification time)."""
    layout = [
        str(source or ""),
        _mtime(source),
        size_bytes,
        MKFS,
        uid,
        gid,
        sorted(
            (name, folder.mode, str(folder.seed or ""), _mtime(folder.seed))
            for name, folder in folders.items()
        ),
    ]
    return hashlib.sha256(json.dumps(layout).encode()).hexdigest()[:24]


def _free_spares(root: Path, key: str) -> list[Path]:
    try:
        entries = sorted((root / SPARES).iterdir())
    except FileNotFoundError:
        return []
    return [entry for entry in entries if entry.name.startswith(f"{SPARE_PREFIX}{key}-")]


def take_spare(
    *,
    root: Path,
    size_bytes: int,
    folders: Mapping[str, Folder],
    uid: int,
    gid: int,
    source: Path | None = None,
) -> QuotaVolume | None:
    """A spare volume of this layout, now the caller's alone (None when there is none).

    Its image's age starts again first (the sweep spares young volumes), then its file in
    .spares/ is removed: only one remover succeeds, a worker or the sweep. `source`: one
    copied from that image (an install snapshot, `make_spare`'s), not from the template."""
    key = _layout_key(size_bytes=size_bytes, folders=folders, uid=uid, gid=gid, source=source)
    for free in _free_spares(root, key):
        image, mountpoint = _paths(root, free.name)
        try:
            os.utime(image)
        except FileNotFoundError:  # released without its file here (an older sweep)
            free.unlink(missing_ok=True)
            continue
        try:
            free.unlink()
        except FileNotFoundError:
            continue  # taken by another
        if not is_mounted(mountpoint):  # the host rebooted since: not usable
            release(root=root, name=free.name)
            continue
        return QuotaVolume(
            name=free.name, image=image, mountpoint=mountpoint, size_bytes=size_bytes
        )
    return None


def make_spare(
    *,
    root: Path,
    size_bytes: int,
    folders: Mapping[str, Folder],
    uid: int,
    gid: int,
    keep: int,
    owner: str = "",
    source: Path | None = None,
) -> str | None:
    """Make one spare volume of this layout (copied from `source` when given) if fewer than
    `keep` are ready; its name. Its file in .spares/ records `owner` (the platform instance
    that made it)."""
    key = _layout_key(size_bytes=size_bytes, folders=folders, uid=uid, gid=gid, source=source)
    if len(_free_spares(root, key)) >= keep:
        return None
    name = f"{SPARE_PREFIX}{key}-{COPIED_MARK if source else ''}{secrets.token_hex(4)}"
    ids = {"uid": uid, "gid": gid}
    allocate(root=root, name=name, size_bytes=size_bytes, folders=folders, **ids, source=source)
    (root / SPARES).mkdir(mode=0o700, exist_ok=True)
    (root / SPARES / name).write_text(owner)
    return name


def copied_spares(*, root: Path, owner: str) -> list[str]:
    """The free spares `owner` copied from an image (an install snapshot), by name."""
    try:
        entries = sorted((root / SPARES).iterdir())
    except FileNotFoundError:
        return []
    return [
        entry.name
        for entry in entries
        if entry.name.startswith(SPARE_PREFIX)
        and entry.name.rsplit("-", 1)[-1].startswith(COPIED_MARK)
        and spare_owner(root=root, name=entry.name) == owner
    ]


def spare_owner(*, root: Path, name: str) -> str | None:
    """The instance that made the free spare `name` ("" if unrecorded); None if it is not one."""
    _check_name(name)
    try:
        return (root / SPARES / name).read_text()
    except OSError:
        return None


def claim_spare(*, root: Path, name: str) -> bool:
    """Take the spare `name` out of the pool (to release it); False if it is not a free spare."""
    _check_name(name)
    try:
        (root / SPARES / name).unlink()
    except FileNotFoundError:
        return False
    return True


def _mtime(path: Path | None) -> int:
    try:
        return path.stat().st_mtime_ns if path is not None else 0
    except FileNotFoundError:
        raise DiskQuotaError(f"the seed folder {path} is missing") from None


def release(*, root: Path, name: str) -> None:
    """Unmount and delete the volume `name`; fine if it is partly or wholly gone already.

    Unmounts lazily when the filesystem is still busy (a container not yet removed): the
    kernel frees it when the last user lets go, and the image file is deleted either way.
    """
    image, mountpoint = _paths(root, name)
    if mountpoint.exists() and is_mounted(mountpoint):
        try:
            _run(["umount", str(mountpoint)], f"unmount the sandbox disk {name}")
        except DiskQuotaError:
            _run(["umount", "-l", str(mountpoint)], f"unmount the sandbox disk {name}")
    if mountpoint.exists():
        if is_mounted(mountpoint):
            raise DiskQuotaError(f"the sandbox disk {name} is still mounted")
        shutil.rmtree(mountpoint, ignore_errors=True)
    try:
        image.unlink()
    except FileNotFoundError:
        pass
    (root / SPARES / name).unlink(missing_ok=True)  # a spare released before it was taken


def volume_names(*, root: Path) -> list[str]:
    """Every volume under `root`, mounted or not (for the reaper's orphan sweep)."""
    if not root.is_dir():
        return []
    names = set()
    for entry in root.iterdir():
        name = entry.name.removesuffix(IMAGE_SUFFIX) if entry.is_file() else entry.name
        if entry.is_file() != entry.name.endswith(IMAGE_SUFFIX):
            continue
        if _NAME.match(name):
            names.add(name)
    return sorted(names)


def free_disk_bytes(path: Path) -> int:
    """Free bytes for ordinary users on the filesystem holding `path` (or its parent)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def committed_bytes(*, root: Path) -> int:
    """What the volumes under `root` may still take from the host: their sizes less what
    their images already occupy (a sparse image grows as its sandbox writes)."""
    return sum(promises(root=root).values())


def promises(*, root: Path) -> dict[str, int]:
    """What each volume under `root` may still take from the host, by name."""
    promised = {}
    for name in volume_names(root=root):
        try:
            st = (root / f"{name}{IMAGE_SUFFIX}").stat()
        except FileNotFoundError:
            continue
        promised[name] = max(0, st.st_size - st.st_blocks * 512)
    return promised


def check_room(
    *,
    root: Path,
    size_bytes: int,
    reserve_bytes: int,
    holders: Callable[[], Mapping[str, str]] | None = None,
) -> None:
    """Refuse a new `size_bytes` volume unless the host keeps `reserve_bytes` free even
    when every volume (the new one too) is filled to its quota. The refusal names who holds
    the promises: `holders()` (asked only then) says who uses each volume, by name; the
    rest are free spare volumes or volumes no sandbox uses (the reaper releases them)."""
    free = free_disk_bytes(root)
    promised = promises(root=root)
    total = sum(promised.values())
    if free - total - size_bytes < reserve_bytes:
        written = sum(_written(root / f"{name}{IMAGE_SUFFIX}") for name in promised)
        named = holders() if holders is not None else {}
        held: dict[str, int] = {}
        for name, size in promised.items():
            who = named.get(name) or (
                "spare volumes"
                if spare_owner(root=root, name=name) is not None
                else "volumes no sandbox uses"
            )
            held[who] = held.get(who, 0) + size
        by = ", ".join(
            f"{who} {_gib(size)}" for who, size in sorted(held.items(), key=lambda i: -i[1]) if size
        )
        raise NoRoom(
            f"the worker's disk is too full to start a sandbox: {_gib(free)} free, "
            f"{_gib(total)} promised to sandboxes' volumes{f' ({by})' if by else ''}, "
            f"{_gib(size_bytes)} needed and {_gib(reserve_bytes)} kept in reserve "
            "(BELVEDIR_MIN_FREE_DISK)",
            later=free + written - size_bytes >= reserve_bytes,
        )


def _written(image: Path) -> int:
    """What a volume's image occupies on the host now (given back when it is released)."""
    try:
        return image.stat().st_blocks * 512
    except FileNotFoundError:
        return 0


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"
