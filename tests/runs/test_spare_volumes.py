"""Spare quota volumes: made ahead after a sandbox, taken whole by the next one of the same
layout (never by two), counted against the disk's reserve, released by the sweep when unused."""

import os
import threading
import time
import uuid

import docker
import pytest
from django.conf import settings

from sandboxes import diskquota, volumes
from sandboxes.base import SandboxSpec
from sandboxes.diskquota import Folder
from sandboxes.docker import DockerBackend

MiB = 2**20
SIZE = 64 * MiB
FOLDERS = {"workspace": Folder(), "tmp": Folder(mode=0o1777)}


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "sandboxes"
    path.mkdir()
    yield path
    for name in diskquota.volume_names(root=path):
        diskquota.release(root=path, name=name)


def make_spare(root, size=SIZE, keep=1):
    return diskquota.make_spare(
        root=root, size_bytes=size, folders=FOLDERS, uid=1000, gid=1000, keep=keep
    )


def take(root, size=SIZE):
    return diskquota.take_spare(root=root, size_bytes=size, folders=FOLDERS, uid=1000, gid=1000)


def test_a_spare_is_made_up_to_the_pool_size_and_taken_once(root):
    assert take(root) is None  # none made yet
    name = make_spare(root)
    assert name and name.startswith("spare-")
    assert make_spare(root) is None  # the pool (1) is full
    assert diskquota.is_mounted(root / name)
    assert take(root, size=2 * SIZE) is None  # another layout's spare does not fit

    volume = take(root)
    assert volume is not None and volume.name == name
    assert take(root) is None  # gone from the pool: nobody else gets it
    assert (volume.folder("workspace")).stat().st_uid == 1000
    assert volume.usage().total > 55 * MiB  # the full quota, formatted

    assert make_spare(root, keep=2) and make_spare(root, keep=2)
    assert make_spare(root, keep=2) is None


def test_two_takers_at_once_never_get_the_same_spare(root):
    make_spare(root, keep=1)
    got, start = [], threading.Barrier(4)

    def taker():
        start.wait()
        got.append(take(root))

    threads = [threading.Thread(target=taker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len([v for v in got if v is not None]) == 1


def test_a_released_spare_leaves_the_pool(root):
    name = make_spare(root)
    diskquota.release(root=root, name=name)
    assert take(root) is None and diskquota.volume_names(root=root) == []
    assert not (root / diskquota.SPARES / name).exists()


def test_spares_count_against_the_disk_reserve(root):
    make_spare(root, size=SIZE)
    free = diskquota.free_disk_bytes(root)
    promised = diskquota.committed_bytes(root=root)
    assert promised > SIZE // 2  # the spare's unwritten quota is promised
    with pytest.raises(diskquota.DiskQuotaError, match="too full"):
        diskquota.check_room(root=root, size_bytes=SIZE, reserve_bytes=free - promised - 1)


# --- with Docker: the backend and the sweep ------------------------------------------------------


@pytest.fixture
def client():
    made = docker.from_env()
    yield made
    made.close()


@pytest.mark.docker
def test_the_sweep_releases_an_unused_spare_and_keeps_a_young_or_taken_one(
    client, root, monkeypatch
):
    image = settings.BELVEDIR_SANDBOX_IMAGE
    layout = dict(image=image, workdir="/workspace", data_dir=root, size_bytes=2**30)
    name = volumes.make_spare(client, **layout, reserve_bytes=0, keep=1)
    assert name and volumes.sweep(client, root) == []  # young: kept

    old = time.time() - volumes.SWEEP_GRACE_SECONDS - 5
    os.utime(root / f"{name}.img", (old, old))
    taken, _ = volumes.allocate(client, **layout, name="unused", reserve_bytes=0, spare=True)
    assert taken.name == name  # taking it made it young again: the sweep keeps it
    assert volumes.sweep(client, root) == []

    spare = volumes.make_spare(client, **layout, reserve_bytes=0, keep=1)
    os.utime(root / f"{spare}.img", (old, old))
    assert volumes.sweep(client, root) == [spare]
    assert diskquota.volume_names(root=root) == [name]
    fresh, _ = volumes.allocate(client, **layout, name="fresh-one", reserve_bytes=0, spare=True)
    assert fresh.name == "fresh-one"  # no spare left: a new volume


@pytest.mark.docker
def test_the_backend_makes_a_spare_after_a_sandbox_and_the_next_one_takes_it(client, root):
    backend = DockerBackend(
        client, instance=f"test-{uuid.uuid4().hex[:8]}", data_dir=root, spare_volumes=1
    )

    def spec():
        return SandboxSpec(
            run_id=f"spare-{uuid.uuid4().hex[:6]}",
            image=settings.BELVEDIR_SANDBOX_IMAGE,
            command=["sh", "-c", "df -P /workspace | tail -1; touch /workspace/mine"],
            workdir="/workspace",
            disk_bytes=2**30,  # room for the image's venv
            network="none",
            user="1000:1000",
        )

    first = backend.launch(spec())
    assert backend.wait(first, timeout=60) == 0
    backend.remove(first)
    spares = os.listdir(root / diskquota.SPARES)
    assert len(spares) == 1  # made as the first one went

    second = backend.launch(spec())
    labels = client.api.inspect_container(second.id)["Config"]["Labels"]
    assert labels[volumes.LABEL_VOLUME] == spares[0]  # the spare, found again by its label
    assert backend.wait(second, timeout=60) == 0
    assert (root / spares[0] / "workspace" / "mine").exists()
    backend.remove(second)
    assert not (root / f"{spares[0]}.img").exists()  # released with its container
    assert len(os.listdir(root / diskquota.SPARES)) == 1  # and the next one made
