from django.contrib import admin

from models_registry.models import MICROS_PER_DOLLAR, CoveredModel, Lab


def _dollars(micros: int) -> str:
    return f"${micros / MICROS_PER_DOLLAR:,.2f}"


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
        return _dollars(obj.input_price_micros)

    @admin.display(description="Output / M tokens", ordering="output_price_micros")
    def output_price(self, obj: CoveredModel) -> str:
        return _dollars(obj.output_price_micros)

    @admin.action(description="Enable the selected models")
    def enable(self, request, queryset):
        queryset.update(enabled=True)

    @admin.action(
        description="Disable the selected models (runs can no longer leave the key blank)"
    )
    def disable(self, request, queryset):
        queryset.update(enabled=False)
