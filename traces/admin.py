from django.contrib import admin

from belvedir.text import counted
from traces.models import Session, Span, Task, TaskGroup
from traces.services.task_forming import tasks_form


@admin.action(description="Form tasks now")
def form_tasks_now(modeladmin, request, queryset):
    for session in queryset:
        tasks_form(session=session)
    modeladmin.message_user(request, f"Formed tasks for {counted(queryset.count(), 'session')}.")


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "project",
        "run",
        "outcome",
        "model",
        "span_count",
        "llm_call_count",
        "last_received_at",
    ]
    list_filter = ["outcome", "project__organization"]
    search_fields = ["external_id", "id", "run__id", "model"]
    list_select_related = ["project__organization", "run"]
    readonly_fields = [f.name for f in Session._meta.fields]
    actions = [form_tasks_now]


@admin.register(Span)
class SpanAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "span_kind",
        "is_llm",
        "model",
        "session",
        "start_time",
        "duration_ms",
        "status_code",
    ]
    list_filter = ["is_llm", "span_kind", "status_code"]
    search_fields = ["name", "trace_id", "span_id", "session__external_id", "model"]
    readonly_fields = [f.name for f in Span._meta.fields]
    list_select_related = ["session"]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "kind",
        "group",
        "session",
        "llm_call_count",
        "total_tokens",
        "status",
        "started_at",
    ]
    list_filter = ["kind", "status"]
    search_fields = ["name", "normalized_name", "session__external_id"]
    list_select_related = ["group", "session"]
    readonly_fields = [f.name for f in Task._meta.fields]


@admin.register(TaskGroup)
class TaskGroupAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "normalized_name",
        "project",
        "task_count",
        "success_count",
        "fail_count",
        "last_seen_at",
    ]
    search_fields = ["name", "normalized_name"]
    readonly_fields = [f.name for f in TaskGroup._meta.fields]
