"""TaskSandbox moved from runs to harbor (harbor's 0001, runs' 0024): on a database that has
rows, migrating forwards keeps every row where it was, readable through the new app, with the
content type (its permissions, its admin log) following it; backwards gives them back."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from harbor.models import TaskSandbox
from tests.helpers.task_sandboxes import make_managed_run

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0023_run_covered_excess"), ("harbor", None)]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_the_move_keeps_every_task_sandbox_row_and_its_content_type(owner):
    run, _ = make_managed_run(owner)
    old_apps = _migrate(BEFORE)
    try:
        old = old_apps.get_model("runs", "TaskSandbox")
        now = timezone.now()
        first = old.objects.create(
            run_id=run.pk, name="capital", status="running", container_id="c1", started_at=now
        )
        second = old.objects.create(
            run_id=run.pk, name="refund", status="stopped", charged=True, charged_micros=250_000
        )
        ContentType.objects.filter(app_label="harbor", model="tasksandbox").delete()
        ContentType.objects.clear_cache()
        old_type = ContentType.objects.get_or_create(app_label="runs", model="tasksandbox")[0]
        permission = Permission.objects.create(
            name="Can view task sandbox", content_type_id=old_type.pk, codename="view_tsb_test"
        )
    finally:
        _migrate(_latest())

    rows = {row.pk: row for row in TaskSandbox.objects.all()}
    assert set(rows) == {first.pk, second.pk}
    assert (rows[first.pk].name, rows[first.pk].status, rows[first.pk].container_id) == (
        "capital",
        "running",
        "c1",
    )
    assert rows[second.pk].charged and rows[second.pk].charged_micros == 250_000
    assert rows[second.pk].run_id == run.pk and run.task_sandboxes.count() == 2
    assert TaskSandbox._meta.db_table == "runs_tasksandbox"
    ContentType.objects.clear_cache()
    moved_type = ContentType.objects.get(pk=old_type.pk)
    assert (moved_type.app_label, moved_type.model) == ("harbor", "tasksandbox")
    assert moved_type.model_class() is TaskSandbox
    assert permission.pk in moved_type.permission_set.values_list("pk", flat=True)


def test_the_move_backwards_leaves_the_rows_to_runs(owner):
    run, _ = make_managed_run(owner)
    kept = TaskSandbox.objects.create(run=run, name="capital")
    try:
        old_apps = _migrate(BEFORE)
        old = old_apps.get_model("runs", "TaskSandbox")
        assert list(old.objects.values_list("pk", "name")) == [(kept.pk, "capital")]
    finally:
        _migrate(_latest())
    assert TaskSandbox.objects.get(pk=kept.pk).name == "capital"
