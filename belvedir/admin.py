from django.contrib import admin

from belvedir import audit, services
from belvedir.admin_mixins import ReadOnlyAdminMixin
from belvedir.models import ApiKey, AuditEvent, Invitation, Membership, Organization, Project
from belvedir.text import counted


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0
    # Changed on the project's own page, through the service that audits it.
    readonly_fields = ["chinese_models_allowed"]


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
    list_display = ["name", "organization", "id", "chinese_models_allowed", "created_at"]
    list_filter = ["chinese_models_allowed", "organization"]
    search_fields = ["name", "id", "organization__name"]

    def save_model(self, request, obj, form, change):
        """The Chinese-models permission changes through the service that audits it, on a new
        project too (saved off first, then allowed)."""
        allowed = form.cleaned_data.get("chinese_models_allowed", False)
        if change and "chinese_models_allowed" in form.changed_data:
            services.project_settings_update(
                project=obj, chinese_models_allowed=allowed, actor=request.user
            )
        if not change:
            obj.chinese_models_allowed = False
        super().save_model(request, obj, form, change)
        if not change and allowed:
            services.project_settings_update(
                project=obj, chinese_models_allowed=True, actor=request.user
            )


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role", "organization"]
    search_fields = ["user__email", "organization__name"]
    autocomplete_fields = ["user"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and "role" in form.changed_data:
            audit.audit_record(
                action=audit.MEMBER_ROLE_CHANGE,
                organization=obj.organization,
                target=obj.user.email,
                metadata={"role": obj.role, "by": "operator"},
                actor=request.user,
            )

    def delete_model(self, request, obj):
        audit.audit_record(
            action=audit.MEMBER_REMOVE,
            organization=obj.organization,
            target=obj.user.email,
            metadata={"by": "operator"},
            actor=request.user,
        )
        super().delete_model(request, obj)


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "organization", "role", "invited_by", "created_at", "expires_at"]
    list_filter = [("accepted_at", admin.EmptyFieldListFilter), "role", "organization"]
    search_fields = ["email", "organization__name", "id"]
    readonly_fields = ["token_hash", "invited_by", "created_at", "accepted_at"]
    list_select_related = ["organization", "invited_by"]

    def has_add_permission(self, request):
        return False  # invitations are made on the organization page, where the link is shown


@admin.action(description="Revoke selected keys")
def revoke_keys(modeladmin, request, queryset):
    count = 0
    for key in queryset.filter(revoked_at__isnull=True).select_related("project__organization"):
        services.api_key_revoke(key=key, actor=request.user)
        count += 1
    modeladmin.message_user(request, f"Revoked {counted(count, 'key')}.")


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


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: the audit log is appended to by the services, never edited."""

    list_display = ["created_at", "organization", "actor_label", "action", "target", "ip"]
    list_filter = ["action", "organization"]
    search_fields = ["actor_label", "target", "action", "ip"]
    date_hierarchy = "created_at"
    list_select_related = ["organization"]
