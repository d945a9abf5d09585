"""The django-q2 entry points moved from <app>/tasks.py to <app>/jobs.py (issue 23, item 4).

django-q2 keeps a job's function as its dotted path: in a schedule's row (Schedule.func, made
by `manage.py setup_schedules`) and inside each queued task's signed payload. An existing
deployment's schedules, and the tasks waiting in the ORM broker's queue (the default broker;
OrmQ), are pointed at the new paths here, so they keep running after the upgrade. A task a
Redis broker holds is not reached: a run's is requeued by the reaper once its marker expires.
"""

from django.db import migrations

MOVED = {
    "runs.tasks.execute_run": "runs.jobs.execute_run",
    "runs.tasks.reap": "runs.jobs.reap",
    "traces.tasks.form_tasks": "traces.jobs.form_tasks",
    "harnesses.tasks.generate_environment": "harnesses.jobs.generate_environment",
}


def _repoint(apps, moved: dict[str, str]) -> None:
    from django_q.signing import SignedPackage

    Schedule = apps.get_model("django_q", "Schedule")
    OrmQ = apps.get_model("django_q", "OrmQ")
    for old, new in moved.items():
        Schedule.objects.filter(func=old).update(func=new)
    for pk, payload in OrmQ.objects.values_list("pk", "payload").iterator():
        try:
            task = SignedPackage.loads(payload)
        except Exception:  # a payload signed with another key is no task of ours  # noqa: BLE001
            continue
        if isinstance(task, dict) and task.get("func") in moved:
            task["func"] = moved[task["func"]]
            OrmQ.objects.filter(pk=pk).update(payload=SignedPackage.dumps(task))


def forwards(apps, schema_editor):
    _repoint(apps, MOVED)


def backwards(apps, schema_editor):
    _repoint(apps, {new: old for old, new in MOVED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0021_run_traces_incomplete"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
