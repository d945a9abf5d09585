"""GPU sandboxes: the shape each GPU type's sandboxes get, and what a GPU host needs before one
can start there (the NVIDIA driver, nvidia-container-toolkit, a runtime that reaches the device).

Shapes: `BELVEDIR_GPU_SHAPES=a10g:cpus=8,memory=32g,disk=100g,shm=8g;a100:memory=96g` (types
apart by `;`, a type's fields by `,`; a field left out keeps the type's default). The defaults
fit an 8B model (16 GB of bf16 weights) under vLLM on each type: host memory for loading the
weights and vLLM's CPU swap space (4 GiB a GPU), disk for vLLM's install (torch and CUDA
wheels, ~10 GB, and pip's copy of them), the weights and an adapter, shared memory for
PyTorch's and NCCL's buffers (Docker's 64 MB default breaks them). The larger cards hold a
larger KV cache, so more requests at once: more CPUs and memory to feed them, as the cloud
instances carrying them have (A10G: g5.2xlarge 8 vCPU/32 GiB; L4: g6.2xlarge; A100: p4d's
12 vCPU/144 GiB a GPU; H100: p5's 24 vCPU/256 GiB a GPU).

The runtime (BELVEDIR_GPU_RUNTIME) is a Docker runtime name. gVisor's way is runsc with
`--nvproxy` (`runsc-gpu`, which scripts/ensure-docker.sh registers), which proxies the driver's
ioctls for the host driver versions that runsc release knows (`runsc nvproxy
list-supported-drivers`); else runc (or NVIDIA's runtime, a shim over runc) with the device
passed through, a weaker boundary. Either way Docker's GPU device request needs
nvidia-container-toolkit (its nvidia-container-runtime-hook) on the host. Pure: no Django.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandboxes import diskquota

GiB = 2**30


@dataclass(frozen=True)
class GpuShape:
    """What one GPU sandbox of a type gets besides its device."""

    cpus: float
    memory: str  # Docker's form, as BELVEDIR_SANDBOX_MEMORY: "32g"
    disk_bytes: int
    shm_bytes: int

    def text(self) -> str:
        """As BELVEDIR_GPU_SHAPES writes it: cpus=8,memory=32g,disk=100g,shm=8g."""
        return (
            f"cpus={self.cpus:g},memory={self.memory},disk={_size_text(self.disk_bytes)},"
            f"shm={_size_text(self.shm_bytes)}"
        )


def _size_text(size: int) -> str:
    for unit, scale in (("g", GiB), ("m", 2**20), ("k", 2**10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def shapes_text(shapes: dict[str, GpuShape]) -> str:
    """`shapes` as BELVEDIR_GPU_SHAPES writes them (parse_shapes reads it back)."""
    return ";".join(f"{kind.lower()}:{shape.text()}" for kind, shape in shapes.items())


# The GPU types the catalog names (harnesses.models.GPU_TYPES); a type with no default here
# gets FALLBACK_SHAPE.
DEFAULT_SHAPES: dict[str, GpuShape] = {
    "A10G": GpuShape(cpus=8, memory="32g", disk_bytes=100 * GiB, shm_bytes=8 * GiB),
    "L4": GpuShape(cpus=8, memory="32g", disk_bytes=100 * GiB, shm_bytes=8 * GiB),
    "A100": GpuShape(cpus=12, memory="64g", disk_bytes=150 * GiB, shm_bytes=16 * GiB),
    "H100": GpuShape(cpus=16, memory="96g", disk_bytes=200 * GiB, shm_bytes=16 * GiB),
}
FALLBACK_SHAPE = DEFAULT_SHAPES["A10G"]
EXAMPLE = "a10g:cpus=8,memory=32g,disk=100g,shm=8g;a100:cpus=12,memory=64g"

_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,15}$")
_SIZE = re.compile(r"^([1-9][0-9]*)([kmgt]?)$", re.IGNORECASE)


class ShapeError(ValueError):
    """A BELVEDIR_GPU_SHAPES value that cannot be read; the message names the bad part."""


def _size(part: str, value: str, minimum: int) -> int:
    match = _SIZE.match(value)
    if not match:
        raise ShapeError(f"{part!r}: a size like 100g, 512m")
    size = int(match.group(1)) * 1024 ** " kmgt".index(match.group(2).lower() or " ")
    if size < minimum:
        least = f"{minimum // GiB}g" if minimum >= GiB else f"{minimum // 2**20}m"
        raise ShapeError(f"{part!r}: at least {least}")
    return size


def _field(shape: GpuShape, part: str) -> GpuShape:
    key, sep, value = (s.strip() for s in part.partition("="))
    if not sep or not value:
        raise ShapeError(f"{part!r}: a field like cpus=8")
    key = key.lower()
    if key == "cpus":
        try:
            cpus = float(value)
        except ValueError:
            cpus = 0.0
        if not 0.5 <= cpus <= 512:
            raise ShapeError(f"{part!r}: CPUs from 0.5 to 512")
        return replace(shape, cpus=cpus)
    if key == "memory":
        if value[-1:].lower() == "t":  # Docker takes b, k, m and g
            raise ShapeError(f"{part!r}: memory in g, like 32g")
        _size(part, value, GiB)
        return replace(shape, memory=value.lower())
    if key == "disk":
        return replace(shape, disk_bytes=_size(part, value, GiB))
    if key == "shm":
        return replace(shape, shm_bytes=_size(part, value, 64 * 2**20))
    raise ShapeError(f"{part!r}: unknown field {key!r} (cpus, memory, disk, shm)")


def parse_shapes(text: str) -> dict[str, GpuShape]:
    """Every default shape, with the types and fields `text` gives in place of theirs."""
    shapes = dict(DEFAULT_SHAPES)
    seen: set[str] = set()
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        kind, sep, fields = entry.partition(":")
        kind = kind.strip()
        if not sep or not _TYPE.match(kind):
            raise ShapeError(f"{entry!r}: a GPU type then its fields, like a10g:cpus=8")
        kind = kind.upper()
        if kind in seen:
            raise ShapeError(f"{entry!r}: {kind} is given twice")
        seen.add(kind)
        shape = shapes.get(kind, FALLBACK_SHAPE)
        for part in (p.strip() for p in fields.split(",")):
            if part:
                shape = _field(shape, part)
        shapes[kind] = shape
    return shapes


def device_request_capabilities() -> list[list[str]]:
    """What a GPU sandbox's device request asks of the NVIDIA stack: the GPU, CUDA (compute)
    and nvidia-smi (utility), so the toolkit mounts both into the sandbox."""
    return [["gpu", "compute", "utility"]]


# --- the host -------------------------------------------------------------------------------

DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
TOOLKIT_HOOK = "nvidia-container-runtime-hook"  # what dockerd runs for a GPU device request
# runsc flags with which an operator runs a driver its nvproxy does not list (an ABI named).
FORCING_FLAGS = ("nvproxy-driver-version", "nvproxy-allow-unsupported-driver")
RUNC_GPU_WARNING = (
    "GPU sandboxes run under {runtime} (BELVEDIR_GPU_RUNTIME), not gVisor: the GPU and its "
    "driver are passed through, and a kernel or driver exploit in a harness reaches the host"
)


@dataclass(frozen=True)
class HostProbes:
    """How the check looks at the host; tests give their own."""

    driver_version: Callable[[], str | None]  # None: no driver loaded
    toolkit: Callable[[], bool]
    device_count: Callable[[], int]
    # The driver versions a runsc binary supports (by its path); None: it cannot say.
    supported_drivers: Callable[[str], list[str] | None]
    cpu_count: Callable[[], int] = lambda: os.cpu_count() or 1
    free_disk: Callable[[Path], int] = diskquota.free_disk_bytes  # of the volumes' folder


def _driver_version() -> str | None:
    try:
        text = DRIVER_VERSION_FILE.read_text()
    except OSError:
        return None
    match = re.search(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b", text)
    return match.group(1) if match else None


def _device_count() -> int:
    return len([p for p in Path("/dev").glob("nvidia[0-9]*") if p.name[6:].isdigit()])


def _supported_drivers(runsc: str) -> list[str] | None:
    try:
        done = subprocess.run(
            [runsc, "nvproxy", "list-supported-drivers"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    versions = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return versions if done.returncode == 0 and versions else None


REAL_PROBES = HostProbes(
    driver_version=_driver_version,
    toolkit=lambda: shutil.which(TOOLKIT_HOOK) is not None,
    device_count=_device_count,
    supported_drivers=_supported_drivers,
)


@dataclass(frozen=True)
class HostCheck:
    problems: list[str] = field(default_factory=list)  # any of these: no GPU sandbox here
    warnings: list[str] = field(default_factory=list)


def runtime_kind(command: list[str]) -> str:
    """ "runsc" (gVisor), "nvidia" (NVIDIA's runtime shim) or "runc", from the runtime's path."""
    name = Path(command[0]).name if command else ""
    if "runsc" in name:
        return "runsc"
    return "nvidia" if "nvidia" in name else "runc"


def check_host(
    *,
    runtime: str,
    runtime_command: list[str] | None,
    devices_wanted: int,
    shapes: Mapping[str, GpuShape] | None = None,
    disk: tuple[Path, int] | None = None,
    probes: HostProbes = REAL_PROBES,
) -> HostCheck:
    """What stops GPU sandboxes from starting on this host, and what weakens them.

    `runtime`: BELVEDIR_GPU_RUNTIME; `runtime_command`: the engine's path and arguments for it
    (None: the engine has no such runtime); `devices_wanted`: the devices BELVEDIR_GPU_TYPES
    gives this host; `shapes`: its types' shapes (Docker refuses more CPUs than the host has);
    `disk`: the quota volumes' folder and the free space kept (a shape's disk must fit)."""
    problems: list[str] = []
    warnings: list[str] = []
    cpus = probes.cpu_count()
    free = probes.free_disk(disk[0]) if disk is not None else None
    for kind, shape in (shapes or {}).items():
        if shape.cpus > cpus:
            problems.append(
                f"the {kind} shape asks for {shape.cpus:g} CPUs but this host has {cpus}, "
                f"which Docker refuses: lower it with BELVEDIR_GPU_SHAPES={kind.lower()}:cpus={cpus}"
            )
        if disk is not None and free is not None and shape.disk_bytes + disk[1] > free:
            problems.append(
                f"the {kind} shape's {shape.disk_bytes / GiB:.0f} GiB disk does not fit this "
                f"host's {free / GiB:.0f} GiB free in {disk[0]} (less "
                f"BELVEDIR_MIN_FREE_DISK, {disk[1] / GiB:.0f} GiB): free some, or lower it with "
                f"BELVEDIR_GPU_SHAPES={kind.lower()}:disk=…"
            )
    version = probes.driver_version()
    if version is None:
        problems.append(
            f"the NVIDIA driver is not loaded ({DRIVER_VERSION_FILE} is missing): install the "
            "driver, then check with nvidia-smi"
        )
    else:
        count = probes.device_count()
        if count < devices_wanted:
            problems.append(
                f"BELVEDIR_GPU_TYPES gives this host {devices_wanted} GPU(s) but it has "
                f"{count} (/dev/nvidia0, …)"
            )
    if not probes.toolkit():
        problems.append(
            f"nvidia-container-toolkit is not installed (no {TOOLKIT_HOOK} on the PATH), "
            "which Docker needs for GPU device requests: apt-get install "
            "nvidia-container-toolkit, then restart Docker"
        )
    if runtime_command is None:
        problems.append(
            f"the Docker engine has no {runtime!r} runtime (BELVEDIR_GPU_RUNTIME): register "
            f"gVisor's with `runsc install --runtime={runtime} -- --nvproxy` and restart "
            "Docker, or set BELVEDIR_GPU_RUNTIME=runc"
        )
        return HostCheck(problems, warnings)
    kind = runtime_kind(runtime_command)
    if kind != "runsc":
        warnings.append(RUNC_GPU_WARNING.format(runtime=runtime))
        return HostCheck(problems, warnings)
    args = runtime_command[1:]
    if not any(a in ("--nvproxy", "--nvproxy=true", "-nvproxy") for a in args):
        problems.append(
            f"the {runtime!r} runtime runs gVisor without --nvproxy (its runtimeArgs: "
            f"{' '.join(args) or 'none'}), so no GPU reaches its sandboxes: register it with "
            f"`runsc install --runtime={runtime} -- --nvproxy`"
        )
    if version is not None:
        supported = probes.supported_drivers(runtime_command[0])
        if supported is None:
            problems.append(
                f"could not ask {runtime_command[0]} which NVIDIA drivers nvproxy supports "
                "(runsc nvproxy list-supported-drivers): a gVisor release from 2023 or later"
            )
        elif version not in supported:
            unsupported = (
                f"the NVIDIA driver {version} is not one this gVisor's nvproxy supports "
                f"({', '.join(sorted(supported)[-6:])}{', …' if len(supported) > 6 else ''})"
            )
            forced = [a for a in args if a.lstrip("-").startswith(FORCING_FLAGS)]
            if forced:  # the operator chose an ABI for it: their call, said out loud
                warnings.append(f"{unsupported}, run anyway as {' '.join(forced)} asks")
            else:
                problems.append(
                    f"{unsupported}: install a supported driver, or a runsc release that "
                    "supports this one"
                )
    return HostCheck(problems, warnings)
