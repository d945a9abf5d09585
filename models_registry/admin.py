from django.contrib import admin

from belvedir.text import size_text, usd
from models_registry.models import (
    CoveredModel,
    FineTunedModel,
    HuggingFaceToken,
    Lab,
)
from models_registry.services import fine_tuned_model_delete


@admin.register(Lab)
class LabAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "is_chinese", "vendor_prefixes", "name_prefixes"]
    list_filter = ["is_chinese"]
    search_fields = ["name", "slug", "vendor_prefixes", "name_prefixes"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(CoveredModel)
class CoveredModelAdmin(admin.ModelAdmin):
    list_display = [
        "model_id",
        "display_name",
        "lab",
        "input_price",
        "output_price",
        "max_output_tokens",
        "enabled",
    ]
    list_filter = ["enabled", "lab__is_chinese", "lab"]
    list_editable = ["enabled"]
    search_fields = ["model_id", "display_name", "lab__name"]
    list_select_related = ["lab"]
    actions = ["enable", "disable"]

    @admin.display(description="Input / M tokens", ordering="input_price_micros")
    def input_price(self, obj: CoveredModel) -> str:
        return usd(obj.input_price_micros)

    @admin.display(description="Output / M tokens", ordering="output_price_micros")
    def output_price(self, obj: CoveredModel) -> str:
        return usd(obj.output_price_micros)

    @admin.action(description="Enable the selected models")
    def enable(self, request, queryset):
        queryset.update(enabled=True)

    @admin.action(
        description="Disable the selected models (runs can no longer leave the key blank)"
    )
    def disable(self, request, queryset):
        queryset.update(enabled=False)


@admin.register(FineTunedModel)
class FineTunedModelAdmin(admin.ModelAdmin):
    list_display = ["name", "base_model", "project", "gated", "adapter_mb", "created_at"]
    list_filter = ["gated", "created_at"]
    search_fields = ["id", "name", "base_model", "project__name", "project__organization__name"]
    list_select_related = ["project"]
    readonly_fields = ["id", "adapter", "adapter_size", "created_by", "created_at"]
    fields = ["id", "project", "name", "base_model", "gated", *readonly_fields[1:]]
    actions = ["delete_with_files"]

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # would leave the adapter files behind
        return actions

    @admin.display(description="Adapter", ordering="adapter_size")
    def adapter_mb(self, obj: FineTunedModel) -> str:
        return size_text(obj.adapter_size)

    def delete_model(self, request, obj):
        fine_tuned_model_delete(model=obj)

    @admin.action(description="Delete the selected models and their adapter files")
    def delete_with_files(self, request, queryset):
        for model in queryset:
            fine_tuned_model_delete(model=model)


@admin.register(HuggingFaceToken)
class HuggingFaceTokenAdmin(admin.ModelAdmin):
    """Who set an organization's token and when; never the token."""

    list_display = ["organization", "updated_by", "updated_at"]
    search_fields = ["organization__name"]
    fields = ["organization", "updated_by", "updated_at"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # set in Organization settings, where it is encrypted
