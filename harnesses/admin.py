from django import forms
from django.contrib import admin
from django.utils import timezone

from belvedir.errors import DomainError
from harnesses import services
from harnesses.models import Harness


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
    readonly_fields = ["id", "created_at", "updated_at"]
    list_select_related = ["project__organization"]
    autocomplete_fields = ["project", "created_by"]

    def save_model(self, request, obj, form, change):
        if change:
            obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)
