from django.contrib import admin

from belvedir.errors import DomainError
from belvedir.text import counted, score_text
from runs import services
from runs.models import Run, Status


@admin.action(description="Cancel selected runs")
def cancel_runs(modeladmin, request, queryset):
    count = 0
    for run in queryset.exclude(status__in=[Status.SUCCEEDED, Status.FAILED, Status.CANCELLED]):
        try:
            services.run_cancel(run=run)
            count += 1
        except DomainError:
            pass
    modeladmin.message_user(request, f"Cancelled {counted(count, 'run')}.")


@admin.action(description="Requeue selected queued runs")
def requeue_runs(modeladmin, request, queryset):
    ids = list(queryset.filter(status=Status.QUEUED).values_list("pk", flat=True))
    for run_id in ids:
        services.run_enqueue(run_id=run_id)
    modeladmin.message_user(request, f"Requeued {counted(len(ids), 'run')}.")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "harness_name",
        "project",
        "status",
        "shown_score",
        "model",
        "created_at",
        "finished_at",
        "worker",
    ]
    list_filter = ["status", "grading", "project__organization"]
    search_fields = ["id", "harness_name", "model", "project__name"]
    date_hierarchy = "created_at"
    actions = [cancel_runs, requeue_runs]
    exclude = [
        "model_api_key_encrypted",
        "judge_api_key_encrypted",
        "run_key_encrypted",
        "score",  # shown as shown_score, with the precision pages use
    ]

    @admin.display(description="score", ordering="score")
    def shown_score(self, run: Run) -> str:
        return score_text(run.score)

    readonly_fields = [
        "id",
        "project",
        "harness",
        "harness_name",
        "harness_snapshot",
        "status",
        "model",
        "model_api_base",
        "judge_model",
        "judge_api_base",
        "attempts",
        "grading",
        "shown_score",
        "results",
        "notes",
        "log_tail",
        "log_size",
        "ingest_key",
        "exit_code",
        "container_id",
        "worker",
        "heartbeat_at",
        "cancel_requested_at",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
    ]

    def has_add_permission(self, request):
        return False  # runs are launched through the checks in runs.services

    def delete_model(self, request, obj):
        services.runs_delete(runs=Run.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):
        services.runs_delete(runs=queryset)
