from django.contrib import admin
from django.utils import timezone

from belvedir.models import ApiKey, Membership, Organization, Project


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "created_at"]
    search_fields = ["name", "id"]
    inlines = [ProjectInline, MembershipInline]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "organization", "id", "created_at"]
    list_filter = ["organization"]
    search_fields = ["name", "id", "organization__name"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role", "organization"]
    search_fields = ["user__email", "organization__name"]
    autocomplete_fields = ["user"]


@admin.action(description="Revoke selected keys")
def revoke_keys(modeladmin, request, queryset):
    count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    modeladmin.message_user(request, f"Revoked {count} key(s).")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "prefix",
        "kind",
        "project",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["kind", ("revoked_at", admin.EmptyFieldListFilter), "project__organization"]
    # A run's key is named "run <run id>", so searching by run id finds it.
    search_fields = ["name", "prefix", "project__name"]
    readonly_fields = ["prefix", "hashed", "created_at", "last_used_at"]
    exclude = []
    actions = [revoke_keys]

    def has_add_permission(self, request):
        return False  # keys are created in the project settings, where the plaintext is shown once
