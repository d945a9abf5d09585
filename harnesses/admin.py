from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from belvedir.admin_mixins import usd_column
from belvedir.errors import DomainError
from harnesses import environments, services
from harnesses.models import (
    Environment,
    EnvironmentGeneration,
    EnvironmentVersion,
    Harness,
    InstallSnapshot,
)


class HarnessAdminForm(forms.ModelForm):
    """Validates through harnesses.services, the same rules as the pages and the API."""

    class Meta:
        model = Harness
        exclude = ["created_at", "updated_at", "env_secrets_encrypted"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:  # secret env values show masked, never in clear
            self.initial["env"] = services.harness_values(harness=self.instance)["env"]

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        data = {field: cleaned.get(field) for field in services.FIELDS}
        instance = None if self.instance._state.adding else self.instance
        preset_unchanged = instance is not None and data.get("preset") == instance.preset
        if preset_unchanged:
            data["preset"] = ""  # an unchanged card is not re-checked, as in harness_update
        try:
            clean = services.harness_validate(
                project=cleaned.get("project"),
                harness=instance,
                **data,
            )
        except DomainError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
            return cleaned
        if preset_unchanged:
            clean["preset"] = instance.preset
        self.instance.env_secrets_encrypted = clean.pop("env_secrets_encrypted")
        cleaned.update(clean)
        return cleaned


@admin.register(Harness)
class HarnessAdmin(admin.ModelAdmin):
    form = HarnessAdminForm
    list_display = [
        "name",
        "project",
        "repo_url",
        "ref",
        "compute",
        "gpu_type",
        "preset",
        "created_at",
    ]
    list_filter = ["compute", "preset", "project__organization"]
    search_fields = ["name", "repo_url", "id", "project__name"]
    readonly_fields = ["id", "environment", "environment_version", "created_at", "updated_at"]
    list_select_related = ["project__organization"]
    autocomplete_fields = ["project", "created_by"]

    def save_model(self, request, obj, form, change):
        if change:
            obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    """Environments are created in the app (tasks validated there); here an operator reads
    them, renames them or changes the description (a new version), and deletes them."""

    list_display = ["name", "project", "version", "task_count", "updated_at", "created_at"]
    list_filter = ["project__organization"]
    search_fields = ["name", "id", "description", "project__name"]
    fields = [
        "id",
        "project",
        "name",
        "description",
        "version",
        "task_count",
        "versions",
        "created_by",
    ]
    readonly_fields = ["id", "project", "version", "task_count", "versions", "created_by"]
    list_select_related = ["project__organization"]

    @admin.display(description="Versions")
    def versions(self, obj: Environment) -> str:
        url = reverse("admin:harnesses_environmentversion_changelist")
        return format_html(
            '<a href="{}?environment__id__exact={}">{} versions</a>',
            url,
            obj.pk,
            obj.versions.count(),
        )

    def has_add_permission(self, request) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        try:
            environments.environment_update(
                environment=obj,
                updated_by=request.user,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
            )
        except DomainError as exc:  # shown as a message; the row is left as it was
            self.message_user(request, exc.message, level="error")


@admin.register(EnvironmentGeneration)
class EnvironmentGenerationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "project",
        "model",
        "covered",
        "status",
        "progress",
        "shown_spent",
        "shown_excess",
        "created_at",
    ]
    list_filter = ["status", "covered", "project__organization"]
    search_fields = ["id", "name", "description", "model", "project__name"]
    exclude = ["api_key_encrypted"]
    readonly_fields = [
        "id",
        "project",
        "name",
        "description",
        "count",
        "model",
        "api_base",
        "covered",
        "shown_cap",
        "shown_spent",
        "shown_excess",
        "covered_excess_calls",
        "preset",
        "status",
        "progress",
        "tasks",
        "error",
        "environment",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
    ]
    list_select_related = ["project__organization"]
    # Covered model spend (billing.spend), like a covered run's.
    shown_cap = usd_column("covered_cap_micros", "covered spend cap")
    shown_spent = usd_column("covered_spent_micros", "covered spend")
    shown_excess = usd_column("covered_excess_micros", "upstream reported more than reserved")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(EnvironmentVersion)
class EnvironmentVersionAdmin(admin.ModelAdmin):
    """Versions are written by harnesses.environments only: read here, never edited."""

    list_display = ["environment", "number", "name", "created_by", "created_at"]
    list_filter = ["environment__project__organization"]
    search_fields = ["environment__id", "environment__name", "name"]
    readonly_fields = ["environment", "number", "name", "description", "tasks", "created_by"]
    list_select_related = ["environment", "created_by"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(InstallSnapshot)
class InstallSnapshotAdmin(admin.ModelAdmin):
    """The install cache's snapshots (deleting a row: that host's reaper deletes the file)."""

    list_display = ["harness", "organization", "host", "run_id", "size_bytes", "reused", "used_at"]
    list_filter = ["organization", "host"]
    search_fields = ["harness__name", "harness__id", "run_id", "key"]
    readonly_fields = [f.name for f in InstallSnapshot._meta.fields]
    list_select_related = ["harness", "organization"]

    def has_add_permission(self, request):
        return False
