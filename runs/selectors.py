"""Run reads. Lists take the project (views pass `access.project`)."""

from django.db.models import Q, QuerySet

from belvedir.models import ApiKey, Project
from runs.models import Run, Status


def run_of_key(key: ApiKey) -> Run | None:
    """The run a per-run key belongs to; None for a project key."""
    if key.kind != ApiKey.Kind.RUN:
        return None
    return Run.objects.filter(ingest_key=key).first()


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


def queue_position(run: Run) -> int | None:
    """A queued run's place in the platform's run queue (1: next to start), else None.

    Runs start in the order they were enqueued, as run workers (Q_WORKERS) come free.
    """
    if run.status != Status.QUEUED:
        return None
    if run.enqueued_at is None:
        return 1
    ahead = Run.objects.filter(status=Status.QUEUED).filter(
        Q(enqueued_at__lt=run.enqueued_at) | Q(enqueued_at=run.enqueued_at, pk__lt=run.pk)
    )
    return ahead.count() + 1
