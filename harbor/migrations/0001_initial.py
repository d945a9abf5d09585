"""TaskSandbox moves from runs to harbor with its rows: its table stays `runs_tasksandbox`
(Meta.db_table), so this only tells Django's state that harbor owns it now (runs' 0024 says runs
no longer does) and moves its content type, with the permissions and admin log that point at
it, to the new app label. Nothing is copied, nothing dropped."""

import belvedir.ids
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def content_type_to(app_label: str, old_label: str):
    def move(apps, schema_editor):
        content_types = apps.get_model("contenttypes", "ContentType")
        if content_types.objects.filter(app_label=app_label, model="tasksandbox").exists():
            return  # post_migrate made the new one already (a fresh database): keep that one
        content_types.objects.filter(app_label=old_label, model="tasksandbox").update(
            app_label=app_label
        )

    return move


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("runs", "0022_jobs_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TaskSandbox",
                    fields=[
                        ("id", models.CharField(default=belvedir.ids.task_sandbox_id, editable=False, max_length=32, primary_key=True, serialize=False)),
                        ("name", models.CharField(max_length=200)),
                        ("image", models.CharField(blank=True, max_length=200)),
                        ("cached", models.BooleanField(default=False)),
                        ("container_id", models.CharField(blank=True, max_length=80)),
                        ("status", models.CharField(choices=[("starting", "Starting"), ("running", "Running"), ("stopped", "Stopped"), ("failed", "Failed")], default="starting", max_length=10)),
                        ("error", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("stopped_at", models.DateTimeField(blank=True, null=True)),
                        ("charged_micros", models.BigIntegerField(default=0)),
                        ("charged", models.BooleanField(default=False)),
                        ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="task_sandboxes", to="runs.run")),
                    ],
                    options={
                        "verbose_name_plural": "task sandboxes",
                        "db_table": "runs_tasksandbox",
                        "ordering": ["-created_at"],
                        "indexes": [
                            models.Index(fields=["run", "status"], name="runs_tasksa_run_id_2fd14a_idx"),
                            models.Index(condition=models.Q(("charged", False)), fields=["stopped_at"], name="task_sandbox_uncharged"),
                            models.Index(fields=["image", "created_at"], name="task_sandbox_image_used"),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            content_type_to("harbor", "runs"), content_type_to("runs", "harbor"), elidable=True
        ),
    ]
