"""The score's standard error, interval and n_tasks for the runs that succeeded before 0025
stored them at a run's end, from their stored results (runs.results.score_uncertainty, pure
Python: it reads no model). Backwards: nothing to undo (0025's reverse drops the columns)."""

from django.db import migrations

BATCH = 500


def backfill(apps, schema_editor):
    from runs.results import score_uncertainty

    Run = apps.get_model("runs", "Run")
    todo = Run.objects.filter(status="succeeded", n_tasks=None).exclude(results=None)
    fields = ["score_stderr", "score_ci_low", "score_ci_high", "n_tasks"]
    batch = []
    for run in todo.only("id", "score", "results", "grading", "attempts").iterator(BATCH):
        got = score_uncertainty(run.results, score=run.score, grading=run.grading, k=run.attempts)
        if got.n_tasks is None:
            continue
        for name, value in got.fields().items():
            setattr(run, name, value)
        batch.append(run)
        if len(batch) >= BATCH:
            Run.objects.bulk_update(batch, fields)
            batch = []
    Run.objects.bulk_update(batch, fields)


class Migration(migrations.Migration):
    dependencies = [("runs", "0025_run_score_uncertainty")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True)]
