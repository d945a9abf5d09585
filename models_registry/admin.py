from decimal import Decimal

from django import forms
from django.contrib import admin

from belvedir.admin_mixins import usd_column
from belvedir.text import size_text
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


MICROS = Decimal(1_000_000)


def _price_field(label: str) -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        min_value=Decimal(0),
        max_value=Decimal(10_000),
        decimal_places=6,
        help_text="US dollars per million tokens, as the provider lists it (0.10).",
    )


class CoveredModelForm(forms.ModelForm):
    """Prices typed in dollars per million tokens (a price in micro-dollars is one zero away
    from ten times itself), stored as integer micro-dollars."""

    input_price_usd = _price_field("Input price (USD / M tokens)")
    output_price_usd = _price_field("Output price (USD / M tokens)")

    class Meta:
        model = CoveredModel
        fields = ["model_id", "display_name", "lab", "max_output_tokens", "enabled"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:
            self.fields["input_price_usd"].initial = self.instance.input_price_micros / MICROS
            self.fields["output_price_usd"].initial = self.instance.output_price_micros / MICROS

    def save(self, commit=True):
        # decimal_places=6 makes both whole numbers of micro-dollars: exact, no float.
        self.instance.input_price_micros = int(self.cleaned_data["input_price_usd"] * MICROS)
        self.instance.output_price_micros = int(self.cleaned_data["output_price_usd"] * MICROS)
        return super().save(commit)


@admin.register(CoveredModel)
class CoveredModelAdmin(admin.ModelAdmin):
    form = CoveredModelForm
    fields = [
        "model_id",
        "display_name",
        "lab",
        "input_price_usd",
        "output_price_usd",
        "max_output_tokens",
        "enabled",
    ]
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

    input_price = usd_column("input_price_micros", "Input / M tokens")
    output_price = usd_column("output_price_micros", "Output / M tokens")

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
    list_select_related = ["project__organization"]
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
    list_select_related = ["organization", "updated_by"]
    search_fields = ["organization__name"]
    fields = ["organization", "updated_by", "updated_at"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # set in Organization settings, where it is encrypted
