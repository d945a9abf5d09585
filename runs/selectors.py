"""Run reads. Lists take the project (views pass `access.project`)."""

from django.db.models import QuerySet

from belvedir.models import Project
from runs.models import Run, Status


def runs_for(
    *,
    project: Project,
    harness: str | None = None,
    status: str | None = None,
    model: str | None = None,
) -> QuerySet[Run]:
    """The project's runs, newest first, optionally of one harness, status or model."""
    runs = Run.objects.filter(project=project)
    if harness:
        runs = runs.filter(harness_id=harness)
    if status and status in Status.values:
        runs = runs.filter(status=status)
    if model:
        runs = runs.filter(model=model)
    return runs


def log_since(run: Run, offset: int) -> dict:
    start = run.log_size - len(run.log_tail)
    text = run.log_tail[max(0, offset - start) :] if offset < run.log_size else ""
    return {"text": text, "offset": run.log_size, "status": run.status, "truncated": offset < start}
