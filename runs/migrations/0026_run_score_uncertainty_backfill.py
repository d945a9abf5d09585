"""Once the score's standard error, interval and n_tasks for the runs that succeeded before 0025
stored them; the backfill now lives with the code that computes them, in scores' 0001
(scores/migrations/0001_score_uncertainty_backfill.py, after 0027), so runs' migrations import
no app above runs. A database that applied this one before gets nothing twice: 0001 fills only
the runs still without an interval."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0025_run_score_uncertainty")]

    operations = []
