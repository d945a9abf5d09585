"""Per-sandbox disk quotas: real sparse images, real ext4, real loop mounts (needs root)."""

import errno
import os
from pathlib import Path

import pytest

from sandboxes import diskquota
from sandboxes.diskquota import DiskQuotaError, Folder

MiB = 1024 * 1024
SIZE = 64 * MiB


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "sandboxes"
    yield path
    for name in diskquota.volume_names(root=path):
        diskquota.release(root=path, name=name)


def make(root: Path, name: str = "run-1", size: int = SIZE, **folders: Folder):
    return diskquota.allocate(
        root=root,
        name=name,
        size_bytes=size,
        folders=folders or {"workspace": Folder(), "tmp": Folder(mode=0o1777)},
        uid=1000,
        gid=1000,
    )


def fill(path: Path) -> OSError:
    """Write zeros into `path` until the filesystem refuses; the error it gave."""
    chunk = b"\0" * MiB
    with open(path, "wb") as handle:
        try:
            for _ in range(10_000):
                handle.write(chunk)
                handle.flush()
        except OSError as exc:
            return exc
    raise AssertionError(f"wrote 10 GB into {path} without running out of space")


def test_a_volume_is_a_mounted_filesystem_with_folders_owned_by_the_sandbox_user(root):
    volume = make(root)

    assert diskquota.is_mounted(volume.mountpoint)
    workspace, tmp = volume.folder("workspace"), volume.folder("tmp")
    assert (workspace.stat().st_uid, workspace.stat().st_gid) == (1000, 1000)
    assert oct(tmp.stat().st_mode & 0o7777) == oct(0o1777)
    assert not (volume.mountpoint / "lost+found").exists()
    assert os.stat(volume.mountpoint).st_dev != os.stat(root).st_dev
    assert 0.9 * SIZE < volume.usage().total <= SIZE


def test_a_new_volume_takes_almost_nothing_from_the_host_because_its_image_is_sparse(root):
    volume = make(root, size=1024 * MiB)

    assert volume.image.stat().st_size == 1024 * MiB
    assert volume.host_bytes() < 64 * MiB


def test_writing_past_the_quota_fails_with_no_space_and_the_volume_reads_as_full(root):
    volume = make(root)
    assert not volume.is_full()

    error = fill(volume.folder("workspace") / "big")

    assert error.errno == errno.ENOSPC
    assert volume.is_full()
    assert volume.host_bytes() <= SIZE
    assert diskquota.NO_SPACE_TEXT == "No space left on device"


def test_running_out_of_inodes_also_reads_as_full(root):
    volume = make(root, size=16 * MiB)
    folder = volume.folder("workspace")
    with pytest.raises(OSError) as raised:
        for n in range(1_000_000):
            (folder / str(n)).touch()

    assert raised.value.errno == errno.ENOSPC
    assert volume.is_full()


def test_folders_are_seeded_with_a_copy_of_a_host_folder_keeping_its_owners(root, tmp_path):
    seed = tmp_path / "seed"
    (seed / "bin").mkdir(parents=True)
    (seed / "bin" / "tool").write_text("#!/bin/sh\n")
    os.chmod(seed / "bin" / "tool", 0o755)
    os.chown(seed / "bin" / "tool", 1000, 1000)
    (seed / "link").symlink_to("bin/tool")

    volume = make(root, venv=Folder(seed=seed))

    copied = volume.folder("venv") / "bin" / "tool"
    assert copied.read_text() == "#!/bin/sh\n"
    assert (copied.stat().st_uid, copied.stat().st_mode & 0o777) == (1000, 0o755)
    assert os.readlink(volume.folder("venv") / "link") == "bin/tool"
    assert volume.folder("venv").stat().st_uid == 1000


def test_release_unmounts_and_deletes_the_image_and_can_be_called_twice(root):
    volume = make(root)
    (volume.folder("workspace") / "data").write_bytes(b"x" * MiB)

    diskquota.release(root=root, name=volume.name)
    diskquota.release(root=root, name=volume.name)

    assert not diskquota.is_mounted(volume.mountpoint)
    assert not volume.image.exists()
    assert not volume.mountpoint.exists()
    assert diskquota.volume_names(root=root) == []


def test_release_of_a_busy_volume_still_deletes_it(root):
    volume = make(root)
    with open(volume.folder("workspace") / "held-open", "w"):
        diskquota.release(root=root, name=volume.name)

        assert not diskquota.is_mounted(volume.mountpoint)
        assert not volume.image.exists()


def test_volume_names_lists_every_volume_even_a_half_made_one_for_the_reaper(root):
    make(root, name="run-a")
    make(root, name="run-b")
    (root / "run-c.img").write_bytes(b"")  # a worker died between truncate and mkfs
    (root / "stray.txt").write_text("not a volume")

    assert diskquota.volume_names(root=root) == ["run-a", "run-b", "run-c"]
    diskquota.release(root=root, name="run-c")
    assert diskquota.volume_names(root=root) == ["run-a", "run-b"]


def test_a_failed_allocation_leaves_nothing_behind(root):
    with pytest.raises(DiskQuotaError, match="not a valid"):
        make(root, name="run-x", **{"../escape": Folder()})
    with pytest.raises(DiskQuotaError, match="at least"):
        make(root, name="run-y", size=MiB)

    assert diskquota.volume_names(root=root) == []


def test_a_volume_name_cannot_reach_outside_the_root_or_be_taken_twice(root):
    for bad in ["../etc", "a/b", "", ".hidden"]:
        with pytest.raises(DiskQuotaError, match="not a valid"):
            make(root, name=bad)
    make(root, name="run-1")
    with pytest.raises(DiskQuotaError, match="already exists"):
        make(root, name="run-1")


def test_room_is_refused_when_the_promised_quotas_would_eat_the_reserve(root):
    make(root, size=1024 * MiB)
    free = diskquota.free_disk_bytes(root)
    promised = diskquota.committed_bytes(root=root)

    assert 1000 * MiB < promised <= 1024 * MiB
    diskquota.check_room(root=root, size_bytes=SIZE, reserve_bytes=free - promised - 2 * SIZE)
    with pytest.raises(DiskQuotaError, match="too full to start a sandbox.*BELVEDIR_MIN_FREE_DISK"):
        diskquota.check_room(root=root, size_bytes=SIZE, reserve_bytes=free - promised)


def test_a_refusal_says_whether_the_volumes_giving_theirs_back_would_make_room(root):
    make(root, size=1024 * MiB)
    free = diskquota.free_disk_bytes(root)
    promised = diskquota.committed_bytes(root=root)

    # Room once the held volume is released: the run may wait for it (runs/executor.py).
    with pytest.raises(diskquota.NoRoom) as refused:
        diskquota.check_room(root=root, size_bytes=SIZE, reserve_bytes=free - promised)
    assert refused.value.later is True
    # Larger than the disk could keep even empty: waiting would not help.
    with pytest.raises(diskquota.NoRoom) as refused:
        diskquota.check_room(root=root, size_bytes=2**60, reserve_bytes=0)
    assert refused.value.later is False


def test_volumes_of_one_layout_are_copies_of_one_template_yet_each_its_own(root, tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "pip.conf").write_text("[global]\n")
    first = make(root, "run-1", venv=Folder(seed=seed))
    (first.folder("venv") / "installed-by-run-1").write_text("x")

    second = make(root, "run-2", venv=Folder(seed=seed))

    assert len(list((root / diskquota.TEMPLATES).iterdir())) == 1
    assert (second.folder("venv") / "pip.conf").read_text() == "[global]\n"
    assert not (second.folder("venv") / "installed-by-run-1").exists()
    assert second.folder("venv").stat().st_uid == 1000
    assert second.host_bytes() < 32 * MiB  # still sparse


def test_a_changed_seed_gets_a_new_template(root, tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    make(root, "run-1", venv=Folder(seed=seed))
    (seed / "added-later").write_text("x")

    second = make(root, "run-2", venv=Folder(seed=seed))

    assert (second.folder("venv") / "added-later").exists()
    assert len(list((root / diskquota.TEMPLATES).iterdir())) == 2
