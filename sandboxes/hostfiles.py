"""A sandbox's workdir as this host sees it: the workspace written in, files read back out,
without the engine's archive calls.

A sandbox with a disk quota has its workdir bind-mounted from a folder of its quota volume
(`sandboxes.volumes`), on the worker's own host. So the worker unpacks the workspace
there before the container starts, and reads the stage marker and results.json there after
it stopped, instead of Docker's put_archive and get_archive (each of which mounts the
container's filesystem: about 50 ms apiece, three per run).

What the sandbox wrote is untrusted. A path is walked one component at a time from the
folder with O_NOFOLLOW, and the file itself opened O_PATH and looked at with fstat before
anything is read, so a symlink is never followed on the host and no FIFO or device is ever
opened for reading. Where the walk meets anything but a plain directory (a symlink, which the
engine would resolve inside the container), `read_file` says it cannot tell, and the caller
asks the engine. Pure Python: no Django.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path, PurePosixPath

from sandboxes.base import Collected, FileKind


def _relative(name: str) -> str | None:
    """`name` as a plain relative path ("" for the top), or None if it is absolute or climbs."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        return None
    return str(path) if str(path) != "." else ""


def unpack_workspace(archive: bytes | Path, dest: Path) -> bool:
    """Unpack a workspace archive (`tar_directory`'s) into the fresh folder `dest`, owners and
    modes as in the archive. False, with nothing written, for an archive holding anything
    else than files, folders and links, a path outside `dest`, or an entry beneath a symlink
    (which would write through it): the engine's put_archive then does it."""
    source = archive.open("rb") if isinstance(archive, Path) else io.BytesIO(archive)
    with source, tarfile.open(fileobj=source) as tar:
        members = tar.getmembers()
        names = [_relative(member.name) for member in members]
        if None in names:
            return False
        symlinks = {name for name, m in zip(names, members, strict=True) if m.issym()}
        for name, member in zip(names, members, strict=True):
            if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                return False
            paths = [name]
            if member.islnk():
                target = _relative(member.linkname)
                if target is None or target in symlinks:  # os.link would follow a symlink
                    return False
                paths.append(target)
            if any(
                str(parent) in symlinks for path in paths for parent in PurePosixPath(path).parents
            ):
                return False
        tar.extractall(dest, members=members, filter="fully_trusted")  # checked above
    return True


def _kind(mode: int) -> FileKind:
    if stat.S_ISREG(mode):
        return FileKind.FILE
    if stat.S_ISDIR(mode):
        return FileKind.DIRECTORY
    if stat.S_ISLNK(mode):
        return FileKind.SYMLINK
    if stat.S_ISFIFO(mode):
        return FileKind.FIFO
    if stat.S_ISSOCK(mode):
        return FileKind.SOCKET
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return FileKind.DEVICE
    return FileKind.OTHER


def read_file(root: Path, relative: str, max_bytes: int) -> Collected | None:
    """The kind and size of `root`/`relative`, and a regular file's bytes when within
    `max_bytes` (as `SandboxBackend.collect` reports them); None when the path passes through
    something other than a plain directory, which only the engine can resolve."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("/", ".", "..") for part in parts):
        return None
    opened: list[int] = []
    try:
        opened.append(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW))
        for part in parts[:-1]:
            try:
                opened.append(
                    os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=opened[-1])
                )
            except FileNotFoundError:
                return Collected(FileKind.MISSING)
            except OSError:  # a symlink or a file on the way
                return None
        try:
            leaf = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW, dir_fd=opened[-1])
        except FileNotFoundError:
            return Collected(FileKind.MISSING)
        opened.append(leaf)
        info = os.fstat(leaf)
        kind = _kind(info.st_mode)
        if kind is not FileKind.FILE or info.st_size > max_bytes:
            return Collected(kind, info.st_size)
        with open(f"/proc/self/fd/{leaf}", "rb") as file:  # the same inode, now for reading
            content = file.read(max_bytes + 1)
        if len(content) > max_bytes:  # it grew between the stat and the read
            return Collected(FileKind.FILE, len(content))
        return Collected(FileKind.FILE, len(content), content)
    finally:
        for fd in opened:
            os.close(fd)
