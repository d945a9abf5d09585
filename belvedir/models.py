from django.conf import settings
from django.db import models
from django.utils import timezone

from belvedir import ids


class Organization(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=ids.org_id, editable=False)
    name = models.CharField(max_length=120)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=ids.project_id, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="projects"
    )
    name = models.CharField(max_length=120)
    # Runs whose model usage the platform covers may name a Chinese lab's model only when on.
    chinese_models_allowed = models.BooleanField(
        default=False,
        help_text="Covered runs (model key left blank) may use models of Chinese labs.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], name="project_name_unique_in_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.organization.name} / {self.name}"


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    READONLY = "readonly", "Read-only member"


WRITE_ROLES = {Role.OWNER, Role.ADMIN, Role.MEMBER}
MANAGE_ROLES = {Role.OWNER, Role.ADMIN}


class Membership(models.Model):
    # The id URLs name (the row's primary key stays internal).
    public_id = models.CharField(max_length=32, unique=True, default=ids.member_id, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["organization__name", "user__email"]
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="one_membership_per_org")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"


class Invitation(models.Model):
    """An email invited into an organization, pending until someone signed in as that email
    accepts it through the link (the token is shown once; only its hash is stored)."""

    id = models.CharField(
        primary_key=True, max_length=32, default=ids.invitation_id, editable=False
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="invitations"
    )
    email = models.EmailField(max_length=150)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "email"],
                condition=models.Q(accepted_at__isnull=True),
                name="one_pending_invitation_per_email",
            )
        ]

    def __str__(self) -> str:
        return f"{self.email} to {self.organization} ({self.role})"

    def is_pending(self, now=None) -> bool:
        return self.accepted_at is None and self.expires_at > (now or timezone.now())


class ApiKey(models.Model):
    class Kind(models.TextChoices):
        PROJECT = "project", "Project key"
        RUN = "run", "Per-run key"

    id = models.CharField(primary_key=True, max_length=32, default=ids.key_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.PROJECT)
    prefix = models.CharField(max_length=24, unique=True)
    hashed = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEvent(models.Model):
    """One security-relevant action, append-only: written by belvedir.audit.audit_record only."""

    organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events"
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who it was, kept when the user or key is gone: an email, "key bv_live_abc…" or "system".
    actor_label = models.CharField(max_length=200)
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organization", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.target}"
