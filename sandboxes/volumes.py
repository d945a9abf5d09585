"""The Docker backend's writable places: one disk-quota volume per sandbox.

The container's root filesystem is read-only. What a harness may write lives in folders of
its own quota volume (`sandboxes.diskquota`), bind-mounted over the image's paths: the
workdir, /tmp, /var/tmp, the sandbox user's home and the venv at /opt/venv. The home and the
venv start as copies of the image's own (extracted once per image into
`<data dir>/.seeds/<image id>/`), so a read-only root changes nothing else for a harness.

A container carries its volume's name in the label `belvedir.volume`; removing the
container releases the volume, and `sweep` releases volumes whose container is gone.

With spares (`allocate(..., spare=True)`), a volume made ahead by `make_spare` after the
previous sandbox is taken when there is one (`diskquota.take_spare`); a spare left unused
for SWEEP_GRACE_SECONDS is released by the sweep like any volume without a container, and
one whose platform instance is gone from the host (`sandboxes.instances`) at once.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import requests

from sandboxes import diskquota
from sandboxes.base import SANDBOX_GID, SANDBOX_UID, NoRoom, SandboxError

LABEL_VOLUME = "belvedir.volume"
SANDBOX_HOME = "/home/sandbox"
SEEDS = ".seeds"
# A volume younger than this may still be waiting for its container: never swept.
SWEEP_GRACE_SECONDS = 600


@dataclass(frozen=True)
class Place:
    """A writable place: the volume's folder `name`, mounted at `target` in the container."""

    name: str
    target: str
    mode: int
    seeded: bool = False  # starts as a copy of what the image has at `target`


def places(workdir: str) -> list[Place]:
    """The writable places of a sandbox whose workdir is `workdir` (a folder of its own)."""
    fixed = ["/", "/tmp", "/var/tmp", SANDBOX_HOME, "/opt/venv"]
    if workdir.rstrip("/") in [p.rstrip("/") for p in fixed]:
        raise SandboxError(f"a sandbox with a disk quota needs a workdir of its own, not {workdir}")
    return [
        Place("workspace", workdir, 0o755),
        Place("tmp", "/tmp", 0o1777),
        Place("var-tmp", "/var/tmp", 0o1777),
        Place("home", SANDBOX_HOME, 0o700, seeded=True),
        Place("venv", "/opt/venv", 0o755, seeded=True),
    ]


def volume_name(container_name: str) -> str:
    return container_name[:100]


def _image_id(client: docker.DockerClient, image: str) -> str:
    with _errors(f"inspect the image {image}"):
        return client.images.get(image).id.split(":")[-1][:16]


def _seed(
    client: docker.DockerClient, image: str, image_id: str, data_dir: Path, target: str
) -> Path | None:
    """The image's folder `target`, extracted once (owners kept); None if the image lacks it."""
    folder = data_dir / SEEDS / image_id / target.strip("/").replace("/", "_")
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _errors(f"read {target} from the image {image}"):
        container = client.api.create_container(image, command=["true"], user="0:0")
    try:
        try:
            stream, _ = client.api.get_archive(container["Id"], target)
        except docker.errors.NotFound:
            return None
        with _errors(f"read {target} from the image {image}"):
            data = b"".join(stream)
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            client.api.remove_container(container["Id"], force=True)
    staging = Path(tempfile.mkdtemp(prefix=".seed-", dir=folder.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(staging, filter="fully_trusted")  # our own image; owners kept
        os.rename(staging / Path(target).name, folder)
    except OSError:
        if not folder.is_dir():  # not just another worker having been quicker
            raise SandboxError(f"could not unpack {target} of the image {image}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def allocate(
    client: docker.DockerClient,
    *,
    image: str,
    workdir: str,
    data_dir: Path,
    name: str,
    size_bytes: int,
    reserve_bytes: int,
    spare: bool = False,
    holders: Callable[[], Mapping[str, str]] | None = None,
    source: Path | None = None,
) -> tuple[diskquota.QuotaVolume, dict[str, dict[str, str]]]:
    """A new quota volume for a sandbox of `image`, and the docker `volumes` that mount it.

    `spare`: a spare of the same layout when one is ready (its name is then not `name`); a
    spare already counts among the volumes the disk keeps room for. `holders`: who uses
    which volume, for a refusal to name (`diskquota.check_room`). `source`: an image of the
    layout to start from (an install snapshot, `sandboxes.installcache`); its spare when one
    was made ahead of it (`make_spare(source=...)`)."""
    wanted = places(workdir)
    folders = _folders(client, image, data_dir, wanted)
    layout = dict(root=data_dir, size_bytes=size_bytes, folders=folders)
    try:
        ids = {"uid": SANDBOX_UID, "gid": SANDBOX_GID}
        volume = diskquota.take_spare(**layout, **ids, source=source) if spare else None
        if volume is None:
            diskquota.check_room(
                root=data_dir, size_bytes=size_bytes, reserve_bytes=reserve_bytes, holders=holders
            )
            volume = diskquota.allocate(**layout, name=name, **ids, source=source)
    except diskquota.NoRoom as exc:
        raise NoRoom(str(exc), later=exc.later) from exc
    except diskquota.DiskQuotaError as exc:
        raise SandboxError(str(exc)) from exc
    mounts = {
        str(volume.folder(place.name)): {"bind": place.target, "mode": "rw"} for place in wanted
    }
    return volume, mounts


def _folders(
    client: docker.DockerClient, image: str, data_dir: Path, wanted: list[Place]
) -> dict[str, diskquota.Folder]:
    image_id = _image_id(client, image)  # one look-up for every seeded place
    return {
        place.name: diskquota.Folder(
            mode=place.mode,
            seed=_seed(client, image, image_id, data_dir, place.target) if place.seeded else None,
        )
        for place in wanted
    }


_making = threading.Lock()


def make_spare(
    client: docker.DockerClient,
    *,
    image: str,
    workdir: str,
    data_dir: Path,
    size_bytes: int,
    reserve_bytes: int,
    keep: int,
    owner: str = "",
    source: Path | None = None,
) -> str | None:
    """Make a spare volume for the next sandbox of this kind (copied from `source`, an
    install snapshot, when given) unless `keep` are ready, the
    disk cannot keep its reserve with one more, or this process is making one already; the
    name of the one made, recorded as `owner`'s (the platform instance). Never raises: a
    missing spare only means a slower next start."""
    if keep < 1 or not _making.acquire(blocking=False):
        return None
    try:
        folders = _folders(client, image, data_dir, places(workdir))
        diskquota.check_room(root=data_dir, size_bytes=size_bytes, reserve_bytes=reserve_bytes)
        return diskquota.make_spare(
            root=data_dir,
            size_bytes=size_bytes,
            folders=folders,
            uid=SANDBOX_UID,
            gid=SANDBOX_GID,
            keep=keep,
            owner=owner,
            source=source,
        )
    except (SandboxError, diskquota.DiskQuotaError, OSError):
        return None
    finally:
        _making.release()


def release(data_dir: Path, name: str) -> None:
    try:
        diskquota.release(root=data_dir, name=name)
    except diskquota.DiskQuotaError as exc:
        raise SandboxError(str(exc)) from exc


def is_full(data_dir: Path, name: str) -> bool:
    """Whether the sandbox's volume ran out of space or inodes (False if it is gone)."""
    mountpoint = data_dir / name
    if not mountpoint.is_dir() or not diskquota.is_mounted(mountpoint):
        return False
    volume = diskquota.QuotaVolume(
        name=name, image=data_dir / f"{name}.img", mountpoint=mountpoint, size_bytes=0
    )
    try:
        return volume.is_full()
    except diskquota.DiskQuotaError:
        return False


def sweep(
    client: docker.DockerClient, data_dir: Path, *, gone: Callable[[str], bool] | None = None
) -> list[str]:
    """Release the volumes whose container no longer exists (of any platform on this engine,
    past a grace period for volumes still waiting for theirs, which a free spare of an
    instance `gone` from this host is not waiting for); the names released."""
    with _errors("list the sandboxes' volumes"):
        used = {
            (item.get("Labels") or {}).get(LABEL_VOLUME)
            for item in client.api.containers(all=True, filters={"label": LABEL_VOLUME})
        }
    released = []
    for name in diskquota.volume_names(root=data_dir):
        if name in used:
            continue
        maker = diskquota.spare_owner(root=data_dir, name=name)
        if _age(data_dir, name) < SWEEP_GRACE_SECONDS and not (maker and gone and gone(maker)):
            continue
        # An unused spare is taken out of the pool first; when a worker took it meanwhile,
        # the worker made it young again before (diskquota.take_spare).
        if not diskquota.claim_spare(root=data_dir, name=name):
            if _age(data_dir, name) < SWEEP_GRACE_SECONDS:
                continue
        release(data_dir, name)
        released.append(name)
    return released


def _age(data_dir: Path, name: str) -> float:
    try:
        return time.time() - (data_dir / f"{name}{diskquota.IMAGE_SUFFIX}").stat().st_mtime
    except FileNotFoundError:
        return SWEEP_GRACE_SECONDS  # a mount point without its image: half released


@contextlib.contextmanager
def _errors(action: str):
    try:
        yield
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise SandboxError(f"could not {action}: {str(exc)[:300]}") from exc
