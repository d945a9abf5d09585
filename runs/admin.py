from django.contrib import admin
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from belvedir.admin_mixins import ReadOnlyAdminMixin, usd_column
from belvedir.errors import DomainError
from belvedir.text import counted, score_text
from runs import gpu, services
from runs.models import GpuDevice, OrganizationSpend, Run, Status, WorkerHost


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
        "engine",
        "shown_excess",
    ]
    list_filter = ["status", "grading", "gpu_type", "project__organization"]
    search_fields = ["id", "harness_name", "model", "project__name"]
    date_hierarchy = "created_at"
    actions = [cancel_runs, requeue_runs]
    exclude = [
        "model_api_key_encrypted",
        "judge_api_key_encrypted",
        "run_key_encrypted",
        "harness_env_secrets_encrypted",
        "score",  # shown as shown_score, with the precision pages use
        "covered_excess_micros",  # shown as shown_excess, in dollars
    ]

    @admin.display(description="score", ordering="score")
    def shown_score(self, run: Run) -> str:
        return score_text(run.score)

    # billing.spend: what the upstream reported past the calls' reservations (never charged
    # to the cap; the platform may have been billed it).
    shown_excess = usd_column("covered_excess_micros", "upstream reported more than reserved")

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
        "engine",
        "gpu_type",
        "gpu_device",
        # The spend cap's money (billing.spend moves it, under its SQL): never typed in here.
        "covered",
        "model_covered",
        "judge_covered",
        "covered_cap_micros",
        "covered_reserved_micros",
        "covered_spent_micros",
        "shown_excess",
        "covered_excess_calls",
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


@admin.register(OrganizationSpend)
class OrganizationSpendAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Platform spend on covered models, summed per organization (not billed to them)."""

    list_display = ["name", "id", "covered_runs", "shown_spend", "shown_excess", "excess_calls"]
    search_fields = ["name", "id"]
    fields = ["name", "id", "covered_runs", "shown_spend", "shown_excess", "excess_calls"]
    readonly_fields = fields

    def get_queryset(self, request):
        covered = Q(projects__runs__covered=True)
        return (
            super()
            .get_queryset(request)
            .annotate(
                covered_spend=Coalesce(Sum("projects__runs__covered_spent_micros"), 0),
                covered_excess=Coalesce(Sum("projects__runs__covered_excess_micros"), 0),
                covered_excess_calls=Coalesce(Sum("projects__runs__covered_excess_calls"), 0),
                covered_run_count=Count("projects__runs", filter=covered),
            )
        )

    @admin.display(description="covered runs", ordering="covered_run_count")
    def covered_runs(self, org) -> int:
        return org.covered_run_count

    shown_spend = usd_column("covered_spend", "covered model spend (USD)")
    shown_excess = usd_column("covered_excess", "upstream reported more than reserved (USD)")

    @admin.display(description="calls over their reservation", ordering="covered_excess_calls")
    def excess_calls(self, org) -> int:
        return org.covered_excess_calls


@admin.action(description="Free selected GPU devices (their runs must have ended)")
def free_devices(modeladmin, request, queryset):
    for device in queryset.exclude(run=None):
        if device.run.is_terminal:
            gpu.device_release(run_id=device.run_id)
    modeladmin.message_user(request, "Freed the devices of ended runs.")


@admin.register(GpuDevice)
class GpuDeviceAdmin(admin.ModelAdmin):
    """Worker hosts' GPUs (registered by their GPU clusters) and the run holding each."""

    list_display = ["gpu_type", "host", "device_id", "run", "held_at", "registered_at"]
    list_filter = ["gpu_type", "host"]
    search_fields = ["host", "device_id", "run__id"]
    list_select_related = ["run"]
    readonly_fields = ["run", "held_at", "registered_at"]
    actions = [free_devices]


@admin.register(WorkerHost)
class WorkerHostAdmin(admin.ModelAdmin):
    """Worker hosts (their runs and GPU clusters report every BELVEDIR_REAP_SECONDS)."""

    list_display = ["name", "engine", "seen_at", "problems"]
    search_fields = ["name", "engine"]
    readonly_fields = ["name", "engine", "seen_at", "problems"]
