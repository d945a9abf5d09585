"""`manage.py gpu_check` (`make gpu-check`): does a GPU sandbox work on this host?

For each GPU type of this host (BELVEDIR_GPU_TYPES; or --type), it checks the host
(belvedir.gpu_host), then launches one sandbox of that type through the platform's own backend,
as a GPU run's is made (its shape, its first device, BELVEDIR_GPU_RUNTIME, the sandbox network),
runs a probe in it and prints a table: nvidia-smi inside, the device count and memory, CUDA
visible to Python (torch.cuda.is_available() where the image has torch), /dev/shm's size
against the shape's, whether the image can compile vLLM's Triton kernels (a C compiler and
Python's headers: not a failure, vLLM needs them, other harnesses may not) and the time to
start. Exit status 1 on any failure. Under
BELVEDIR_GPU_SIMULATE=1 the sandbox gets no device, so nvidia-smi fails: as it should.
"""

from __future__ import annotations

import json
import secrets
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from belvedir.gpu_host import gpu_host_check, gpu_sandbox, host_devices
from belvedir.sandbox_config import get_backend, spec_from_settings
from sandboxes.base import SandboxError, SandboxHandle

MARK = "belvedir-gpu-check "
TIMEOUT = 300  # seconds a probe may take (a runsc start with nvproxy, a cold image)
# Runs inside the sandbox: one JSON line after MARK, whatever the image lacks.
PROBE = r"""
import json, os, shutil, subprocess
print("started", flush=True)
found = {}
smi = shutil.which("nvidia-smi")
if smi is None:
    found["smi_error"] = "nvidia-smi not found in the sandbox"
else:
    done = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version",
                           "--format=csv,noheader,nounits"], capture_output=True, text=True)
    if done.returncode:
        found["smi_error"] = (done.stderr or done.stdout).strip()[:300] or f"exit {done.returncode}"
    else:
        found["gpus"] = [[c.strip() for c in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
try:
    import torch
    found["torch"] = [torch.__version__, torch.cuda.is_available(), torch.cuda.device_count()]
except ImportError:
    found["torch"] = None
except Exception as exc:
    found["torch_error"] = f"{type(exc).__name__}: {exc}"[:300]
import sysconfig
found["cc"] = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
found["python_h"] = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
st = os.statvfs("/dev/shm")
found["shm"] = st.f_blocks * st.f_frsize
print("MARK" + json.dumps(found), flush=True)
""".replace("MARK", MARK)


def _gib(size: float) -> str:
    return f"{size / 2**30:.1f} GiB"


class Command(BaseCommand):
    help = "Launch a GPU sandbox on this host and report what it sees; exit 1 on any failure."

    def add_arguments(self, parser):
        parser.add_argument("--type", help="one GPU type of BELVEDIR_GPU_TYPES (default: each)")
        parser.add_argument(
            "--image",
            default="",
            help="the sandbox image (default BELVEDIR_GPU_IMAGE, else BELVEDIR_SANDBOX_IMAGE); "
            "one with torch also shows CUDA from Python",
        )

    def handle(self, *args, **options):
        devices = host_devices()
        types = [options["type"].upper()] if options["type"] else list(devices)
        if not types:
            raise CommandError("this host has no GPU (BELVEDIR_GPU_TYPES is empty)")
        unknown = [t for t in types if t not in devices]
        if unknown:
            raise CommandError(f"BELVEDIR_GPU_TYPES gives this host no {', '.join(unknown)}")
        failed: list[str] = []
        for kind in types:
            rows = self.check_type(kind, devices[kind][0], options["image"])
            self.table(kind, rows)
            failed += [f"{kind} {name}" for name, _, ok in rows if ok is False]
        if failed:
            raise CommandError(f"GPU check failed: {', '.join(failed)}")
        self.stdout.write("GPU check passed.")

    def table(self, kind: str, rows: list[tuple[str, str, bool | None]]) -> None:
        width = max(len(name) for name, _, _ in rows)
        self.stdout.write(f"\nGPU check: {kind} on this host\n")
        for name, result, ok in rows:
            mark = {True: "ok", False: "FAIL", None: "-"}[ok]
            self.stdout.write(f"  {name:<{width}}  {mark:<4}  {result}")

    def check_type(self, kind: str, device: str, image: str) -> list[tuple[str, str, bool | None]]:
        check = gpu_host_check(refresh=True)
        simulated = (
            " (simulated: BELVEDIR_GPU_SIMULATE=1)" if settings.BELVEDIR_GPU_SIMULATE else ""
        )
        rows: list[tuple[str, str, bool | None]] = [("host", p, False) for p in check.problems]
        rows = rows or [("host", f"ready{simulated}", True)]
        rows += [("warning", w, None) for w in check.warnings]
        fields = gpu_sandbox(kind, device)
        spec = spec_from_settings(
            run_id=f"gpu-check-{secrets.token_hex(4)}",
            command=["python3", "-c", PROBE],
            **fields | ({"image": image} if image else {}),
        )
        where = f"runtime {spec.runtime or 'default'}, device {spec.gpu_device or 'none'}"
        started = time.monotonic()
        try:
            output, first, code = self.run_probe(spec)
        except SandboxError as exc:
            return [*rows, ("sandbox", f"could not start ({where}): {exc}", False)]
        rows.append(
            (
                "start",
                f"{first - started:.1f} s to the first output ({where}), exit {code}",
                code == 0 and first > 0,
            )
        )
        found = next(
            (
                json.loads(line[len(MARK) :])
                for line in output.splitlines()
                if line.startswith(MARK)
            ),
            None,
        )
        if found is None:
            return [*rows, ("probe", f"no report from the sandbox: {output[-300:]!r}", False)]
        return rows + self.probe_rows(found, devices_wanted=1, shm_wanted=spec.shm_bytes or 0)

    def run_probe(self, spec) -> tuple[str, float, int | None]:
        """The probe's output, when its first output came (time.monotonic()), its exit code."""
        backend = get_backend()
        handle: SandboxHandle = backend.launch(spec)
        first, chunks = 0.0, []
        try:
            for chunk in backend.stream_logs(handle):
                first = first or time.monotonic()
                chunks.append(chunk)
            code = backend.wait(handle, timeout=TIMEOUT)
        finally:
            backend.kill(handle)
            backend.remove(handle)
        return b"".join(chunks).decode(errors="replace"), first, code

    def probe_rows(self, found: dict, *, devices_wanted: int, shm_wanted: int) -> list:
        rows: list[tuple[str, str, bool | None]] = []
        gpus = found.get("gpus")
        if gpus is None:
            rows.append(("nvidia-smi", found.get("smi_error", "no answer"), False))
        else:
            rows.append(
                ("nvidia-smi", "; ".join(", ".join(g) for g in gpus) or "no GPU", bool(gpus))
            )
            mib = sum(float(g[1]) for g in gpus if len(g) > 1 and g[1].replace(".", "").isdigit())
            rows.append(
                ("devices", f"{len(gpus)} (expected {devices_wanted})", len(gpus) == devices_wanted)
            )
            rows.append(("GPU memory", _gib(mib * 2**20), mib > 0))
        torch = found.get("torch")
        if "torch_error" in found:
            rows.append(("torch CUDA", found["torch_error"], False))
        elif torch is None:
            rows.append(("torch CUDA", "torch is not in the image (not checked)", None))
        else:
            version, available, count = torch
            rows.append(
                ("torch CUDA", f"torch {version}: is_available() {available}, {count}", available)
            )
        cc, headers = found.get("cc"), found.get("python_h")
        rows.append(
            (
                "compiler",
                f"{cc}, Python.h"
                if cc and headers
                else f"{'no C compiler' if not cc else cc}{'' if headers else ', no Python.h'}: "
                "vLLM's Triton kernels compile with them at run time (BELVEDIR_GPU_IMAGE)",
                True if cc and headers else None,
            )
        )
        shm = int(found.get("shm") or 0)
        rows.append(
            (
                "shared memory",
                f"/dev/shm {_gib(shm)} (shape {_gib(shm_wanted)})",
                shm >= shm_wanted * 0.95,
            )
        )
        return rows
