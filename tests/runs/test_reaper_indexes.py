"""The reaper's queries read only the rows they are after: each pass looks for task sandboxes
stopped but never charged, and with thousands of settled ones beside a few uncharged (fresh
statistics, the planner free to scan), EXPLAIN names the partial index `task_sandbox_uncharged`
(charged=False) and scans no table."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from harbor.models import TaskSandbox
from harbor.reaper import SETTLE_GRACE, task_sandboxes_unsettled

pytestmark = pytest.mark.django_db


def test_the_unsettled_task_sandboxes_are_found_through_the_uncharged_partial_index(make_run):
    run = make_run(status="succeeded")
    long_ago = timezone.now() - timedelta(hours=1)
    TaskSandbox.objects.bulk_create(
        TaskSandbox(run=run, name=f"settled-{i}", status="stopped", started_at=long_ago,
                    stopped_at=long_ago, charged=True, charged_micros=1)
        for i in range(5000)
    )  # fmt: skip
    lost = TaskSandbox.objects.create(
        run=run, name="lost", status="stopped", started_at=long_ago, stopped_at=long_ago
    )
    just_stopped = timezone.now() - timedelta(seconds=SETTLE_GRACE / 2)  # its own stop charges it
    TaskSandbox.objects.create(run=run, name="fresh", status="stopped", stopped_at=just_stopped)
    TaskSandbox.objects.create(run=run, name="alive", status="running", started_at=long_ago)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_tasksandbox")

    assert list(task_sandboxes_unsettled().values_list("pk", flat=True)) == [lost.pk]
    explained = task_sandboxes_unsettled().values_list("pk", flat=True).explain()
    assert "task_sandbox_uncharged" in explained, explained
    assert "Seq Scan" not in explained, explained
