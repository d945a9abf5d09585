"""GPU runs: their queues, which GPU types this platform serves, and the devices of a worker host.

A GPU run goes to its type's django-q2 queue (`gpu-a10g`), which only a GPU worker host's
cluster of that type reads (`Q_CLUSTER_NAME=gpu-a10g manage.py qcluster`, one worker per
device). Before the run starts, its worker claims one free device of its type on its host
(a conditional update: safe across processes and hosts) and the sandbox gets that device
alone; the run holds it while it runs and renews the lease with every heartbeat. The device is
released when the run ends (finished, failed, cancelled); a killed worker's device is free
again once its lease is older than BELVEDIR_HEARTBEAT_STALE, and the reaper clears it.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Now

from belvedir.db import reconnecting
from belvedir.gpu_host import host_devices
from belvedir.sandbox_config import worker_host
from runs.models import TERMINAL, GpuDevice

QUEUE_PREFIX = "gpu-"


def queue_name(gpu_type: str) -> str:
    """The django-q2 queue (cluster name) of a GPU type's runs: gpu-a10g."""
    return f"{QUEUE_PREFIX}{gpu_type.lower()}"


def queue_gpu_type(cluster_name: str) -> str | None:
    """The GPU type a cluster name serves (gpu-a10g → A10G); None for other clusters."""
    if cluster_name.startswith(QUEUE_PREFIX) and len(cluster_name) > len(QUEUE_PREFIX):
        return cluster_name[len(QUEUE_PREFIX) :].upper()
    return None


def gpu_types_served() -> list[str]:
    """The GPU types a worker serves: BELVEDIR_GPU_TYPES, and any a GPU worker host registered
    its devices for (a web host need not list them itself)."""
    served = list(settings.BELVEDIR_GPU_TYPES)
    for kind in GpuDevice.objects.values_list("gpu_type", flat=True).distinct():
        if kind not in served:
            served.append(kind)
    return served


def with_article(gpu_type: str) -> str:
    """ "an A10G", "a T4": the article for the type's name as it is read aloud (letter names)."""
    return f"{'an' if gpu_type[:1].upper() in 'AEFHILMNORSX' else 'a'} {gpu_type}"


def waiting_for(gpu_type: str) -> str:
    return f"waiting for {with_article(gpu_type)} worker"


@reconnecting
def devices_register() -> list[GpuDevice]:
    """Record this host's devices (idempotent); a device whose type changed is updated."""
    host, rows = worker_host(), []
    for kind, ids in host_devices().items():
        for device_id in ids:
            device, _ = GpuDevice.objects.update_or_create(
                host=host, device_id=device_id, defaults={"gpu_type": kind}
            )
            rows.append(device)
    return rows


def _lease_cutoff():
    """On the database's clock, as leases are written: hosts' clocks may differ."""
    return Now() - timedelta(seconds=settings.BELVEDIR_HEARTBEAT_STALE)


def _free() -> Q:
    return Q(run__isnull=True) | Q(held_at__isnull=True) | Q(held_at__lt=_lease_cutoff())


@reconnecting
def device_claim(*, run_id: str, gpu_type: str) -> GpuDevice | None:
    """One free device of `gpu_type` on this host, now held by the run; None if all are busy.

    Each candidate is taken with a conditional update, so two workers (processes or hosts)
    never hold one device. A run whose device another worker holds (its task delivered twice)
    gets none: that worker is starting it. A lapsed hold of the run's (its worker was killed)
    is dropped first, so a run holds one device at most."""
    held = GpuDevice.objects.filter(run_id=run_id)
    if held.filter(held_at__gte=_lease_cutoff()).exists():
        return None
    held.update(run=None, held_at=None)
    host = worker_host()
    ids = host_devices().get(gpu_type, [])
    if not ids:
        return None
    devices_register()
    candidates = GpuDevice.objects.filter(host=host, gpu_type=gpu_type, device_id__in=ids)
    for device in candidates.filter(_free()).order_by("device_id"):
        taken = (
            GpuDevice.objects.filter(pk=device.pk)
            .filter(_free())
            .update(run_id=run_id, held_at=Now())
        )
        if taken == 1:
            device.refresh_from_db(fields=["run", "held_at"])
            return device
    return None


def _held(run_id: str, device_pk: int | None):
    held = GpuDevice.objects.filter(run_id=run_id)
    return held if device_pk is None else held.filter(pk=device_pk)


@reconnecting
def device_renew(*, run_id: str, device_pk: int | None = None) -> None:
    _held(run_id, device_pk).update(held_at=Now())


@reconnecting
def device_release(*, run_id: str, device_pk: int | None = None) -> None:
    """Free the run's device. A worker passes the one it claimed (`device_pk`), so a worker
    whose claim came to nothing never frees the device another worker runs the run on."""
    _held(run_id, device_pk).update(run=None, held_at=None)


def devices_release_stale() -> list[str]:
    """Free the devices whose lease ran out (their worker was killed) or whose run ended;
    the devices freed, as host/device id."""
    stale = GpuDevice.objects.filter(run__isnull=False).filter(
        Q(held_at__isnull=True) | Q(held_at__lt=_lease_cutoff()) | Q(run__status__in=TERMINAL)
    )
    freed = []
    for device in stale:
        if (
            GpuDevice.objects.filter(
                pk=device.pk, run_id=device.run_id, held_at=device.held_at
            ).update(run=None, held_at=None)
            == 1
        ):
            freed.append(f"{device.host}/{device.device_id}")
    return freed
