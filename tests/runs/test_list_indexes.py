"""The list queries have indexes that serve their filter and their order: with another
organization's rows beside the owner's (so a project's filter is selective), fresh statistics
and sequential scans and sorts off (the tables are small enough that PostgreSQL would
rather scan and sort them), EXPLAIN of each list's page query names its index and sorts nothing."""

import pytest
from django.db import connection
from django.utils import timezone

from billing.models import LedgerEntry
from runs import selectors as run_selectors
from runs.models import Run
from traces import selectors as trace_selectors
from traces.models import Session

pytestmark = pytest.mark.django_db


def plan(queryset) -> str:
    with connection.cursor() as cursor:
        # The test's transaction only. At this size a scan or a sort of 30 rows is cheapest;
        # with both off the planner shows what serves the filter and the order by itself.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
    return queryset.explain()


def others(outsider, count: int = 3000) -> None:
    """Rows of another organization in the tables the lists read."""
    Run.objects.bulk_create(
        Run(project=outsider.project, harness_name="other", status="succeeded", score=0.5,
            finished_at=timezone.now())
        for _ in range(count)
    )  # fmt: skip
    Session.objects.bulk_create(
        Session(project=outsider.project, external_id=f"other-{i}") for i in range(count)
    )
    LedgerEntry.objects.bulk_create(
        LedgerEntry(organization=outsider.org, kind="credit", amount_micros=1) for _ in range(count)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def test_each_list_query_is_served_by_an_index_on_its_filter_and_order(owner, outsider, seeded):
    others(outsider)
    project, harness = owner.project, seeded.harnesses[0].pk
    scored = Run.objects.filter(project=project, score__isnull=False).exclude(finished_at=None)
    lists = {
        "run_project_newest": run_selectors.runs_for(project=project)[:25],
        "run_harness_newest": run_selectors.runs_for(project=project, harness=harness)[:10],
        "run_project_finished": scored.order_by("-finished_at", "-pk")[:300],
        "traces_sess_project_fa66ec_idx": trace_selectors.sessions_for(project=project)[:25],
        "task_project_newest": trace_selectors.tasks_for(project=project)[:25],
        "taskgroup_project_seen": trace_selectors.task_groups_for(project=project)[:25],
        "ledger_organization_newest": LedgerEntry.objects.filter(organization=owner.org)[:25],
    }
    for index, queryset in lists.items():
        explained = plan(queryset)
        assert index in explained and "Sort" not in explained.split(index)[0], (index, explained)
