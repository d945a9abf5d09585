"""System checks of GPU runs, shown when runserver, qcluster or `manage.py check` start: the GPU
types and shapes name types a harness can ask for, and this host's GPU sandboxes can start."""

from django.conf import settings
from django.core import checks

from belvedir.gpu_host import gpu_host_check
from harnesses.models import GPU_TYPES
from sandboxes.gpu import DEFAULT_SHAPES


@checks.register("gpu")
def gpu_types(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """BELVEDIR_GPU_TYPES and BELVEDIR_GPU_SHAPES may only name GPU types a harness can ask
    for; the host's GPU problems are warnings (the platform still serves pages and CPU runs)."""
    found: list[checks.CheckMessage] = []
    unknown = [kind for kind in settings.BELVEDIR_GPU_TYPES if kind not in GPU_TYPES]
    if unknown:
        found.append(
            checks.Error(
                f"BELVEDIR_GPU_TYPES names {', '.join(unknown)}, which no harness can ask for",
                hint=f"Use GPU types of {', '.join(GPU_TYPES)}, like a10g:1.",
                id="harnesses.E001",
            )
        )
    shaped = [k for k in settings.BELVEDIR_GPU_SHAPES if k not in GPU_TYPES + list(DEFAULT_SHAPES)]
    if shaped:
        found.append(
            checks.Error(
                f"BELVEDIR_GPU_SHAPES names {', '.join(shaped)}, which no harness can ask for",
                hint=f"Shape GPU types of {', '.join(GPU_TYPES)}, like a10g:cpus=8,memory=32g.",
                id="harnesses.E002",
            )
        )
    check = gpu_host_check(refresh=True)
    hint = "See docs/operating.md#gpu-hosts; `manage.py gpu_check` tries a GPU sandbox."
    found += [
        checks.Warning(
            f"GPU sandboxes cannot start on this host: {p}; its GPU launches are refused",
            hint=hint,
            id="harnesses.W001",
        )
        for p in check.problems
    ]
    found += [checks.Warning(f"GPU sandboxes: {w}", id="harnesses.W002") for w in check.warnings]
    return found
