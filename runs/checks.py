"""System checks: sandbox isolation and the GPU types, shown when runserver, qcluster or
`manage.py check` start."""

from django.conf import settings
from django.core import checks

from belvedir.isolation import isolation_status
from harnesses.models import GPU_TYPES


@checks.register("sandbox")
def sandbox_isolation(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """Warnings only: the platform still serves pages while launches are refused."""
    status = isolation_status(refresh=True)
    hint = "Run scripts/ensure-docker.sh as root (docs/isolation.md)."
    found: list[checks.CheckMessage] = [
        checks.Warning(
            f"sandbox isolation is not in place: {problem}; launches are refused",
            hint=hint,
            id="runs.W001",
        )
        for problem in status.problems
    ]
    found += [checks.Warning(f"sandbox isolation: {w}", id="runs.W002") for w in status.warnings]
    return found


@checks.register("gpu")
def gpu_types(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """BELVEDIR_GPU_TYPES may only name GPU types a harness can ask for."""
    unknown = [kind for kind in settings.BELVEDIR_GPU_TYPES if kind not in GPU_TYPES]
    return (
        [
            checks.Error(
                f"BELVEDIR_GPU_TYPES names {', '.join(unknown)}, which no harness can ask for",
                hint=f"Use GPU types of {', '.join(GPU_TYPES)}, like a10g:1.",
                id="runs.E001",
            )
        ]
        if unknown
        else []
    )
