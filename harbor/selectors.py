"""Reads of the managed Harbor workspace."""

from __future__ import annotations

from django.db import models

from billing import selectors as billing_selectors
from harbor.models import TaskSandbox
from harnesses import managed
from runs.contract import run_harness_env
from runs.models import Run
from runs.selectors import run_is_managed

PAGE_ROWS = 50


def page_view(run: Run) -> dict:
    """What the run page's task-sandbox partial (harbor.views.run_task_sandboxes) shows of a
    managed Harbor run's task sandboxes: the newest rows, how many at once, the price per
    minute (micro-dollars) and the total charged so far."""
    if not run_is_managed(run):
        return {"task_sandboxes": None}
    rows = list(TaskSandbox.objects.filter(run=run)[:PAGE_ROWS])
    totals = TaskSandbox.objects.filter(run=run).aggregate(
        count=models.Count("pk"), charged=models.Sum("charged_micros")
    )
    return {
        "task_sandboxes": rows,
        "task_sandboxes_count": totals["count"],
        "task_sandboxes_alive": sum(1 for row in rows if row.is_alive),
        "task_sandboxes_charged": totals["charged"] or 0,
        "task_sandbox_concurrency": managed.concurrency(run_harness_env(run)),
        "task_sandbox_price": billing_selectors.task_sandbox_price_per_minute(),
    }
