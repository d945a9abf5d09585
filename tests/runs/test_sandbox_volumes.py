"""The Docker backend's quota volumes: seeded from the image, mounted over a read-only root,
released with their container, swept when their container is gone."""

import uuid

import docker
import pytest
from django.conf import settings

from sandboxes import diskquota, volumes

pytestmark = pytest.mark.docker
GiB = 2**30


@pytest.fixture
def client():
    made = docker.from_env()
    yield made
    made.close()


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "sandboxes"
    path.mkdir()
    yield path
    for name in diskquota.volume_names(root=path):
        diskquota.release(root=path, name=name)


def allocate(client, data_dir, name=None):
    return volumes.allocate(
        client,
        image=settings.BELVEDIR_SANDBOX_IMAGE,
        workdir="/workspace",
        data_dir=data_dir,
        name=name or f"test-{uuid.uuid4().hex[:8]}",
        size_bytes=GiB,
        reserve_bytes=0,
    )


def test_the_writable_places_are_mounted_from_one_volume_with_home_and_venv_seeded(
    client, data_dir
):
    volume, mounts = allocate(client, data_dir)

    assert sorted(m["bind"] for m in mounts.values()) == [
        "/home/sandbox",
        "/opt/venv",
        "/tmp",
        "/var/tmp",
        "/workspace",
    ]
    assert all(path.startswith(str(volume.mountpoint) + "/") for path in mounts)
    venv = volume.folder("venv")
    assert (venv / "bin" / "python3").is_symlink()
    assert (venv / "lib").stat().st_uid == 1000
    assert (volume.folder("home") / ".bashrc").stat().st_uid == 1000
    assert volume.folder("tmp").stat().st_mode & 0o7777 == 0o1777


def test_an_image_is_unpacked_once_for_every_sandbox_after(client, data_dir):
    first, _ = allocate(client, data_dir)
    (seed_root,) = (data_dir / volumes.SEEDS).iterdir()
    marker = seed_root / "opt_venv" / "unpacked-once"
    marker.write_text("x")

    second, _ = allocate(client, data_dir)

    assert (second.folder("venv") / "unpacked-once").exists()
    assert len(list((data_dir / volumes.SEEDS).iterdir())) == 1


def test_a_volume_reads_as_full_once_its_sandbox_filled_it(client, data_dir):
    volume, _ = allocate(client, data_dir)
    assert not volumes.is_full(data_dir, volume.name)

    with open(volume.folder("workspace") / "big", "wb") as handle:
        with pytest.raises(OSError):
            while True:
                handle.write(b"\0" * 2**20)
                handle.flush()

    assert volumes.is_full(data_dir, volume.name)
    volumes.release(data_dir, volume.name)
    assert not volumes.is_full(data_dir, volume.name)


def test_the_sweep_releases_volumes_whose_container_is_gone_and_keeps_the_others(
    client, data_dir, monkeypatch
):
    monkeypatch.setattr(volumes, "SWEEP_GRACE_SECONDS", 0)
    orphan, _ = allocate(client, data_dir)
    kept, _ = allocate(client, data_dir)
    container = client.containers.create(
        settings.BELVEDIR_SANDBOX_IMAGE, ["true"], labels={volumes.LABEL_VOLUME: kept.name}
    )
    try:
        released = volumes.sweep(client, data_dir)
    finally:
        container.remove(force=True)

    assert released == [orphan.name]
    assert diskquota.volume_names(root=data_dir) == [kept.name]


def test_a_fresh_volume_waiting_for_its_container_is_not_swept(client, data_dir):
    volume, _ = allocate(client, data_dir)

    assert volumes.sweep(client, data_dir) == []
    assert diskquota.volume_names(root=data_dir) == [volume.name]


def test_a_sandbox_is_refused_when_the_disk_cannot_keep_its_reserve(client, data_dir):
    with pytest.raises(volumes.SandboxError, match="too full to start a sandbox"):
        volumes.allocate(
            client,
            image=settings.BELVEDIR_SANDBOX_IMAGE,
            workdir="/workspace",
            data_dir=data_dir,
            name="refused",
            size_bytes=GiB,
            reserve_bytes=2**60,
        )
    assert diskquota.volume_names(root=data_dir) == []


def test_the_reaper_releases_a_volume_whose_sandbox_is_gone(client, data_dir, monkeypatch, db):
    from runs import reaper
    from sandboxes.docker import DockerBackend

    monkeypatch.setattr(volumes, "SWEEP_GRACE_SECONDS", 0)
    orphan, _ = allocate(client, data_dir)
    backend = DockerBackend(client, instance=f"test-{uuid.uuid4().hex[:8]}", data_dir=data_dir)
    monkeypatch.setattr(reaper, "get_backend", lambda: backend)

    assert reaper.reap()["released"] == [orphan.name]
    assert diskquota.volume_names(root=data_dir) == []
