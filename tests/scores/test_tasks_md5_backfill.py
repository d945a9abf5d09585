"""runs' 0029 gives the runs launched before Run.tasks_md5 the MD5 of their snapshot's Tasks
field, the digest a launch stores (Python's of the UTF-8 text), so the leaderboards group old
and new runs of one task set together."""

from hashlib import md5

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import Run
from tests.scores.test_score_uncertainty_backfill import _migrate

pytestmark = pytest.mark.django_db(transaction=True)


def test_older_runs_get_the_md5_of_the_tasks_field_in_their_snapshot(owner):
    old_apps = _migrate([("runs", "0028_run_model_proxied")])
    tasks = '[{"prompt": "Résumé the café\'s menu"}]'
    try:
        old = old_apps.get_model("runs", "Run")
        made = {
            name: old.objects.create(
                project_id=owner.project.pk, harness_name="h", harness_snapshot=snapshot
            ).pk
            for name, snapshot in {
                "tasks": {"tasks": tasks, "name": "h"},
                "blank": {"tasks": ""},
                "none": {},
            }.items()
        }
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    digest = {name: Run.objects.get(pk=pk).tasks_md5 for name, pk in made.items()}
    assert digest == {
        "tasks": md5(tasks.encode()).hexdigest(),
        "blank": md5(b"").hexdigest(),
        "none": md5(b"").hexdigest(),
    }
