from django.contrib import admin

from belvedir.admin_mixins import usd_column
from belvedir.text import counted
from harbor import services
from harbor.models import TaskSandbox


@admin.action(description="Stop selected task sandboxes")
def stop_task_sandboxes(modeladmin, request, queryset):
    alive = list(queryset.filter(status__in=TaskSandbox.ALIVE))
    for sandbox in alive:
        services.task_sandbox_stop(sandbox=sandbox)
    modeladmin.message_user(
        request, f"Stopped {counted(len(alive), 'task sandbox,task sandboxes')}."
    )


@admin.register(TaskSandbox)
class TaskSandboxAdmin(admin.ModelAdmin):
    """Managed Harbor task containers: what ran for which run, and what it cost."""

    list_display = ["id", "name", "run", "status", "cached", "started_at", "stopped_at", "cost"]
    list_filter = ["status", "cached"]
    search_fields = ["id", "name", "run__id", "container_id", "image"]
    list_select_related = ["run"]
    actions = [stop_task_sandboxes]
    readonly_fields = [
        "id",
        "run",
        "name",
        "image",
        "cached",
        "container_id",
        "status",
        "error",
        "created_at",
        "started_at",
        "stopped_at",
        "charged",
        "charged_micros",
    ]

    cost = usd_column("charged_micros", "charged")

    def has_add_permission(self, request) -> bool:
        return False
