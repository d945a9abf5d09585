"""The install cache's engine (sandboxes/installcache.py) on real quota volumes: a snapshot is
found only under its own organization and key, restores what the volume held, is evicted least
recently used first to stay within the budget, is never kept over the budget or the disk's
reserve, and is removed by the sweep once nothing keeps it (or a copy was left half-made)."""

import os
import time
import uuid

import pytest

from sandboxes import diskquota, installcache
from sandboxes.installcache import InstallCache, InstallCacheError

MiB = 2**20
FOLDERS = {"workspace": diskquota.Folder(), "venv": diskquota.Folder()}
KEY = "a" * 64


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "sandboxes"
    path.mkdir()
    yield path
    for name in diskquota.volume_names(root=path):
        diskquota.release(root=path, name=name)


def volume_with(data_dir, megabytes: int, text: str = "installed") -> diskquota.QuotaVolume:
    volume = diskquota.allocate(
        root=data_dir,
        name=f"v-{uuid.uuid4().hex[:8]}",
        size_bytes=64 * MiB,
        folders=FOLDERS,
        uid=1000,
        gid=1000,
    )
    (volume.folder("workspace") / "built.txt").write_text(text)
    with open(volume.folder("venv") / "blob", "wb") as f:
        f.write(os.urandom(megabytes * MiB))
    return volume


def save(data_dir, volume, organization="org_a", key=KEY, budget=64 * MiB, reserve=0, cache="test"):
    return installcache.save(
        data_dir / installcache.CACHE_DIR / cache,
        InstallCache(organization=organization, key="base"),
        key,
        volume=volume,
        data_dir=data_dir,
        run_id=f"run_{volume.name}",
        budget=budget,
        reserve_bytes=reserve,
    )


def test_a_snapshot_is_found_only_by_its_organization_and_key_and_restores_the_volume(data_dir):
    volume = volume_with(data_dir, 1, text="from run one")
    snapshot = save(data_dir, volume)
    root = snapshot.image.parent.parent

    assert installcache.find(root, "org_a", KEY) == snapshot
    assert installcache.find(root, "org_b", KEY) is None  # another tenant: never
    assert installcache.find(root, "org_a", "b" * 64) is None  # another key
    assert snapshot.bytes < 8 * MiB  # sparse: what was written, not the 64 MiB
    with pytest.raises(InstallCacheError):
        installcache.find(root, "../org_a", KEY)  # no way out of the organization's folder

    restored = diskquota.allocate(
        root=data_dir,
        name="restored",
        size_bytes=64 * MiB,
        folders=FOLDERS,
        uid=1000,
        gid=1000,
        source=snapshot.image,
    )
    assert (restored.folder("workspace") / "built.txt").read_text() == "from run one"
    assert (restored.folder("venv") / "blob").stat().st_size == MiB


def test_the_least_recently_used_snapshot_is_evicted_to_stay_within_the_budget(data_dir):
    first = save(data_dir, volume_with(data_dir, 3), key="1" * 64, budget=8 * MiB)
    second = save(data_dir, volume_with(data_dir, 3), key="2" * 64, budget=8 * MiB)
    root = first.image.parent.parent
    time.sleep(0.05)
    installcache.touch(first)  # used again: now the second is the least recently used

    third = save(data_dir, volume_with(data_dir, 3), key="3" * 64, budget=8 * MiB)

    kept = {s.key for s in installcache.snapshots(root)}
    assert kept == {first.key, third.key}
    assert not second.image.exists()
    assert installcache.total_bytes(root) <= 8 * MiB


def test_a_snapshot_over_the_budget_or_the_disks_reserve_is_not_kept(data_dir):
    with pytest.raises(InstallCacheError, match="over the cache's budget"):
        save(data_dir, volume_with(data_dir, 4), budget=2 * MiB)
    reserve = diskquota.free_disk_bytes(data_dir)  # all of the free disk kept in reserve
    with pytest.raises(InstallCacheError, match="reserve"):
        save(data_dir, volume_with(data_dir, 1), reserve=reserve)
    root = data_dir / installcache.CACHE_DIR / "test"
    assert installcache.snapshots(root) == []
    assert not any(p.suffix == ".img" for p in root.rglob("*")) if root.exists() else True


def test_the_sweep_removes_what_nothing_keeps_half_made_copies_and_what_is_over_budget(data_dir):
    kept = save(data_dir, volume_with(data_dir, 3), key="1" * 64)
    dropped = save(data_dir, volume_with(data_dir, 3), key="2" * 64)
    root = kept.image.parent.parent
    partial = root / f"{installcache.SAVING_PREFIX}old.img"
    partial.write_bytes(b"x")
    old = time.time() - installcache.SAVING_GRACE_SECONDS - 1
    os.utime(partial, (old, old))

    removed = installcache.sweep(root, budget=64 * MiB, keep=lambda s: s.key == kept.key)

    assert [s.key for s in removed] == [dropped.key]
    assert not partial.exists() and not dropped.image.exists()
    left = installcache.find(root, "org_a", kept.key)
    assert installcache.sweep(root, budget=MiB, keep=None) == [left]  # over a smaller budget
    assert installcache.snapshots(root) == []


def test_a_spare_copied_from_a_snapshot_serves_only_a_restore_of_that_snapshot(data_dir):
    snapshot = save(data_dir, volume_with(data_dir, 1, text="from the snapshot"))
    layout = {
        "root": data_dir,
        "size_bytes": 64 * MiB,
        "folders": FOLDERS,
        "uid": 1000,
        "gid": 1000,
    }
    plain = diskquota.make_spare(**layout, keep=1)
    copied = diskquota.make_spare(**layout, keep=1, source=snapshot.image)
    assert plain and copied and plain != copied

    assert diskquota.copied_spares(root=data_dir, owner="") == [copied]  # the empty one not
    restored = diskquota.take_spare(**layout, source=snapshot.image)
    assert restored is not None and restored.name == copied  # never the empty one
    assert (restored.folder("workspace") / "built.txt").read_text() == "from the snapshot"
    assert diskquota.take_spare(**layout, source=snapshot.image) is None  # taken once
    fresh = diskquota.take_spare(**layout)
    assert fresh is not None and fresh.name == plain
    assert not (fresh.folder("workspace") / "built.txt").exists()


def test_the_budget_is_the_hosts_every_platform_instances_snapshots_together(data_dir):
    theirs = save(data_dir, volume_with(data_dir, 3), key="1" * 64, budget=8 * MiB, cache="other")
    ours = save(data_dir, volume_with(data_dir, 3), key="2" * 64, budget=8 * MiB)
    save(data_dir, volume_with(data_dir, 3), key="3" * 64, budget=8 * MiB)

    assert not theirs.image.exists()  # the host's least recently used, another instance's
    assert ours.image.exists()
    assert sum(s.bytes for s in installcache.host_snapshots(ours.image.parent.parent)) <= 8 * MiB


def test_removed_snapshots_leave_no_empty_folder_and_an_eviction_of_the_last_keeps_the_new_one(
    data_dir,
):
    """An organization's folder goes with its last snapshot (cleared, swept, evicted): a host
    keeps no folder for every organization it ever cached. A save whose own eviction takes
    its organization's last other snapshot still keeps the new one."""
    first = save(data_dir, volume_with(data_dir, 3), key="1" * 64, budget=4 * MiB)
    root = first.image.parent.parent

    second = save(data_dir, volume_with(data_dir, 3), key="2" * 64, budget=4 * MiB)  # evicts it

    assert not first.image.exists() and second.image.exists()
    assert installcache.find(root, "org_a", second.key) == second
    theirs = save(data_dir, volume_with(data_dir, 1), organization="org_b", key="3" * 64)
    assert installcache.clear(root, "org_a") == [second]
    assert not (root / "org_a").exists()  # no empty folder of it
    assert installcache.sweep(root, budget=64 * MiB, keep=lambda s: False) == [theirs]
    assert [p.name for p in root.iterdir()] == []
