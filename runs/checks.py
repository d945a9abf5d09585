"""System checks: sandbox isolation, shown when runserver, qcluster or `manage.py check` start
(the GPU types, shapes and host: harnesses/checks.py)."""

from django.core import checks

from belvedir.isolation import isolation_status


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
