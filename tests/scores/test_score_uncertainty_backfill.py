"""scores' 0001 (once runs' 0026) gives the runs that succeeded before error bars were stored
theirs, from their stored results; a run without per-task results, or that failed, keeps none
(the first says why)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import Run
from tests.runs.test_score_error_bars import FIFTY_TASKS

pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_older_succeeded_runs_get_their_error_bar_from_their_stored_results(owner):
    old_apps = _migrate([("runs", "0025_run_score_uncertainty")])
    try:
        old = old_apps.get_model("runs", "Run")
        made = {
            name: old.objects.create(
                project_id=owner.project.pk, harness_name="h", attempts=1, **fields
            ).pk
            for name, fields in {
                "fifty": {"status": "succeeded", "score": 0.62, "results": FIFTY_TASKS},
                "no_tasks": {"status": "succeeded", "score": 0.7, "results": {"score": 0.7}},
                "failed": {"status": "failed", "results": FIFTY_TASKS},
            }.items()
        }
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    fifty = Run.objects.get(pk=made["fifty"])
    assert fifty.n_tasks == 50 and fifty.score_stderr == pytest.approx(0.069341, abs=1e-6)
    assert (fifty.score_ci_low, fifty.score_ci_high) == pytest.approx(
        (0.484093, 0.755907), abs=1e-5
    )
    no_tasks = Run.objects.get(pk=made["no_tasks"])
    assert no_tasks.score_stderr is None and no_tasks.n_tasks is None
    assert no_tasks.score_interval_note == "results.json has no per-task results"
    assert Run.objects.get(pk=made["failed"]).n_tasks is None
