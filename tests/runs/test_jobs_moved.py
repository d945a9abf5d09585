"""The django-q2 entry points live in <app>/jobs.py; a deployment's schedules and queued tasks
that name the old <app>/tasks.py paths are pointed at them by runs' migration 0022."""

import importlib

import pytest
from django.apps import apps
from django.utils.module_loading import import_string
from django_q.models import OrmQ, Schedule
from django_q.signing import SignedPackage

from runs.queue import runs_with_queued_tasks

moved = importlib.import_module("runs.migrations.0022_jobs_moved")


def _queued(func: str, *args) -> OrmQ:
    task = {"id": f"t-{func}", "name": "n", "func": func, "args": args, "kwargs": {}}
    return OrmQ.objects.create(key="runs", payload=SignedPackage.dumps(task))


def _schedule(name: str, func: str) -> Schedule:
    return Schedule.objects.create(name=name, func=func, schedule_type=Schedule.MINUTES, minutes=1)


@pytest.mark.parametrize("new", sorted(moved.MOVED.values()))
def test_every_moved_job_names_a_function_that_exists(new):
    assert callable(import_string(new))


def test_the_migration_points_old_schedules_at_the_moved_jobs(db):
    reap = _schedule("reap runs", "runs.tasks.reap")
    form = _schedule("form trace tasks", "traces.tasks.form_tasks")
    other = _schedule("someone else's", "math.floor")

    moved.forwards(apps, None)

    assert Schedule.objects.get(pk=reap.pk).func == "runs.jobs.reap"
    assert Schedule.objects.get(pk=form.pk).func == "traces.jobs.form_tasks"
    assert Schedule.objects.get(pk=other.pk).func == "math.floor"


def test_a_run_queued_before_the_upgrade_is_still_its_runs_task_after_it(db):
    run_task = _queued("runs.tasks.execute_run", "run_abc")
    generation = _queued("harnesses.tasks.generate_environment", "gen_1")
    other = _queued("math.floor", 1.5)
    foreign = OrmQ.objects.create(key="runs", payload="not signed by us")
    assert runs_with_queued_tasks(["run_abc"]) == set()  # the old path is not the run's task

    moved.forwards(apps, None)

    assert OrmQ.objects.get(pk=run_task.pk).task["func"] == "runs.jobs.execute_run"
    assert OrmQ.objects.get(pk=run_task.pk).task["args"] == ("run_abc",)
    assert OrmQ.objects.get(pk=generation.pk).task["func"] == (
        "harnesses.jobs.generate_environment"
    )
    assert OrmQ.objects.get(pk=other.pk).task["func"] == "math.floor"
    assert OrmQ.objects.get(pk=foreign.pk).payload == "not signed by us"
    assert runs_with_queued_tasks(["run_abc"]) == {"run_abc"}


def test_the_migration_backwards_restores_the_old_paths(db):
    reap = _schedule("reap runs", "runs.jobs.reap")
    run_task = _queued("runs.jobs.execute_run", "run_abc")

    moved.backwards(apps, None)

    assert Schedule.objects.get(pk=reap.pk).func == "runs.tasks.reap"
    assert OrmQ.objects.get(pk=run_task.pk).task["func"] == "runs.tasks.execute_run"
