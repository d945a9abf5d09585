"""TaskSandbox now belongs to harbor (harbor's 0001): runs forgets it in Django's state only;
its table, `runs_tasksandbox`, and every row in it stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0023_run_covered_excess"),
        ("harbor", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="TaskSandbox")],
            database_operations=[],
        ),
    ]
