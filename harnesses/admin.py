from django.contrib import admin

from harnesses.models import Harness


@admin.register(Harness)
class HarnessAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "repo_url", "ref", "compute", "gpu_type", "preset", "created_at"]
    list_filter = ["compute", "preset", "project__organization"]
    search_fields = ["name", "repo_url", "id", "project__name"]
    readonly_fields = ["id", "created_at", "updated_at"]
