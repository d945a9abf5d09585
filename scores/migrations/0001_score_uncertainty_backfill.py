"""The score's standard error, interval and n_tasks, or why there is none, for the runs that
succeeded before a run's end stored them (runs' 0025 and 0027 added the columns), from their
stored results (scores.results.score_uncertainty, pure Python: it reads no model). Moved from
runs' 0026, and it fills score_interval_note too. Backwards: nothing to undo (runs' reverse
migrations drop the columns)."""

from django.db import migrations

BATCH = 500
FIELDS = ["score_stderr", "score_ci_low", "score_ci_high", "n_tasks", "score_interval_note"]


def backfill(apps, schema_editor):
    from scores.results import score_uncertainty

    Run = apps.get_model("runs", "Run")
    todo = Run.objects.filter(status="succeeded", score_stderr=None, score_interval_note="")
    batch = []
    for run in todo.only("id", "score", "results", "grading", "attempts").iterator(BATCH):
        got = score_uncertainty(run.results, score=run.score, grading=run.grading, k=run.attempts)
        for name, value in got.fields().items():
            setattr(run, name, value)
        batch.append(run)
        if len(batch) >= BATCH:
            Run.objects.bulk_update(batch, FIELDS)
            batch = []
    Run.objects.bulk_update(batch, FIELDS)


class Migration(migrations.Migration):
    dependencies = [("runs", "0027_run_score_interval_note")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True)]
