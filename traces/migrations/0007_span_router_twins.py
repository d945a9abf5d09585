import django.db.models.deletion
from django.db import migrations, models

# The router's spans stored so far (written by it alone, in its runs' sessions).
_ROUTER_SPANS = (
    "UPDATE traces_span SET from_router = true WHERE scope_name = 'belvedir.router'"
    " AND run_id IS NOT NULL AND attributes ? 'belvedir.router.cost_micros'"
)
# A run's session shows the model under test: the run's launch model (not its judge's).
_RUN_MODELS = (
    "UPDATE traces_session AS s SET model = r.model, model_started_at = NULL"
    " FROM runs_run AS r WHERE s.run_id = r.id AND r.model <> ''"
)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0020_task_sandbox_image_used_index"),
        ("traces", "0006_session_fewer_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="span",
            name="duplicate_of",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="traces.span",
            ),
        ),
        migrations.AddField(
            model_name="span",
            name="from_router",
            field=models.BooleanField(default=False),
        ),
        migrations.RunSQL(_ROUTER_SPANS, migrations.RunSQL.noop),
        migrations.RunSQL(_RUN_MODELS, migrations.RunSQL.noop),
    ]
