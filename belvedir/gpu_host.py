"""Can this host start GPU sandboxes, and what is a GPU run's sandbox made of?

A host whose BELVEDIR_GPU_TYPES names GPUs (not simulated: BELVEDIR_GPU_SIMULATE=1 has nothing
to check) is checked by `sandboxes.gpu.check_host`: its types' shapes fit its CPUs and free
disk, the NVIDIA driver is loaded, as many devices as BELVEDIR_GPU_TYPES gives,
nvidia-container-toolkit, and BELVEDIR_GPU_RUNTIME on the engine
(runsc: with --nvproxy and a driver version its nvproxy supports; runc or NVIDIA's runtime: a
warning, as for CPU sandboxes under runc). A problem refuses GPU launches of this host's types
here (a 503 naming it), stops its GPU cluster from serving, and stops a GPU run from starting
on it; it never fails a run inside Docker. Results are cached for CACHE_SECONDS per process.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings

from belvedir.errors import Unavailable
from belvedir.isolation import IsolationStatus, isolation_status
from belvedir.sandbox_config import get_backend
from sandboxes import gpu
from sandboxes.base import SandboxError

log = logging.getLogger(__name__)
CACHE_SECONDS = 60.0
PROBES: gpu.HostProbes = gpu.REAL_PROBES  # how the host is looked at; tests give their own
_SETTINGS = (
    "BELVEDIR_GPU_TYPES",
    "BELVEDIR_GPU_SIMULATE",
    "BELVEDIR_GPU_RUNTIME",
    "BELVEDIR_GPU_SHAPES",
    "BELVEDIR_SANDBOX_DISK",
    "BELVEDIR_SANDBOX_DATA_DIR",
    "BELVEDIR_MIN_FREE_DISK",
)
_lock = threading.Lock()
_cached: tuple[float, tuple, gpu.HostCheck] | None = None


def _check() -> gpu.HostCheck:
    types = settings.BELVEDIR_GPU_TYPES
    if not types or settings.BELVEDIR_GPU_SIMULATE:
        return gpu.HostCheck()
    runtime = settings.BELVEDIR_GPU_RUNTIME
    try:
        command = get_backend().runtime_command(runtime)
    except SandboxError as exc:
        return gpu.HostCheck(problems=[f"the Docker engine does not answer ({str(exc)[:200]})"])
    return gpu.check_host(
        runtime=runtime,
        runtime_command=command,
        devices_wanted=sum(types.values()),
        shapes={kind: shape_of(kind) for kind in types},
        disk=(Path(settings.BELVEDIR_SANDBOX_DATA_DIR), settings.BELVEDIR_MIN_FREE_DISK)
        if settings.BELVEDIR_SANDBOX_DISK
        else None,
        probes=PROBES,
    )


def gpu_host_check(*, refresh: bool = False) -> gpu.HostCheck:
    """This host's GPU problems and warnings (none where it has no GPU or simulates them)."""
    global _cached
    key = (*(getattr(settings, name) for name in _SETTINGS), id(PROBES))
    with _lock:
        if (
            not refresh
            and _cached is not None
            and _cached[1] == key
            and time.monotonic() - _cached[0] < CACHE_SECONDS
        ):
            return _cached[2]
        check = _check()
        changed = _cached is None or (_cached[2] != check)
        _cached = (time.monotonic(), key, check)
    if changed:
        for problem in check.problems:
            log.error(
                "GPU sandboxes cannot start on this host: %s; GPU launches are refused", problem
            )
        for warning in check.warnings:
            log.warning("GPU sandboxes: %s", warning)
    return check


def gpu_problems(gpu_type: str) -> list[str]:
    """What stops a GPU sandbox of `gpu_type` on this host; none where the host has no such
    GPU (another host's worker serves it and checks itself)."""
    if gpu_type not in settings.BELVEDIR_GPU_TYPES:
        return []
    return gpu_host_check().problems


def refusal(gpu_type: str, problems: list[str]) -> str:
    return (
        f"GPU sandboxes cannot start on this host ({gpu_type}): {'; '.join(problems)}. "
        f"{gpu_type} runs cannot start here until an operator fixes it."
    )


def gpu_require(gpu_type: str) -> None:
    """Raise Unavailable (a 503) naming what is missing while this host's `gpu_type`
    sandboxes could not start."""
    problems = gpu_problems(gpu_type)
    if problems:
        raise Unavailable(refusal(gpu_type, problems))


def sandbox_status(gpu_type: str = "") -> IsolationStatus:
    """The isolation status, with this host's GPU problems for a run of `gpu_type`."""
    status = isolation_status()
    problems = gpu_problems(gpu_type) if gpu_type else []
    if not problems:
        return status
    return replace(status, problems=[*status.problems, refusal(gpu_type, problems)])


def host_devices() -> dict[str, list[str]]:
    """This host's devices by type, from BELVEDIR_GPU_TYPES: Docker device ids 0, 1, … in the
    order the types are listed (a10g:1,a100:2 → A10G ["0"], A100 ["1", "2"])."""
    devices, index = {}, 0
    for kind, count in settings.BELVEDIR_GPU_TYPES.items():
        devices[kind] = [str(i) for i in range(index, index + count)]
        index += count
    return devices


def shape_of(gpu_type: str) -> gpu.GpuShape:
    return settings.BELVEDIR_GPU_SHAPES.get(gpu_type, gpu.FALLBACK_SHAPE)


def gpu_sandbox(gpu_type: str, device_id: str) -> dict[str, Any]:
    """The SandboxSpec fields of a GPU run's sandbox: its type's shape (BELVEDIR_GPU_SHAPES;
    no disk quota where BELVEDIR_SANDBOX_DISK turns them off), BELVEDIR_GPU_IMAGE when set,
    then the device and BELVEDIR_GPU_RUNTIME. Simulated GPUs (BELVEDIR_GPU_SIMULATE): the shape (its CPUs at
    most the host's, its disk at most BELVEDIR_SANDBOX_DISK), no device, the CPU sandboxes'
    runtime."""
    shape = shape_of(gpu_type)
    cpus, disk = shape.cpus, shape.disk_bytes
    if settings.BELVEDIR_GPU_SIMULATE:  # a development machine: its CPUs, the CPU runs' disk
        cpus = min(cpus, float(PROBES.cpu_count()))
        disk = min(disk, settings.BELVEDIR_SANDBOX_DISK)
    fields: dict[str, Any] = {
        "cpus": cpus,
        "memory": shape.memory,
        "disk_bytes": disk if settings.BELVEDIR_SANDBOX_DISK else None,
        "shm_bytes": shape.shm_bytes,
    }
    if settings.BELVEDIR_GPU_IMAGE:
        fields["image"] = settings.BELVEDIR_GPU_IMAGE
    if not settings.BELVEDIR_GPU_SIMULATE:
        fields |= {"gpu_device": device_id, "runtime": settings.BELVEDIR_GPU_RUNTIME}
    return fields
