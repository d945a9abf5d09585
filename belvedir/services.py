"""Tenancy and API key writes."""

import functools
import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from belvedir import audit
from belvedir.errors import Invalid, Unavailable
from belvedir.models import ApiKey, Membership, Organization, Project, Role

KEY_PREFIX = "bv_live_"
_PREFIX_LEN = 12
_LAST_USED_RESOLUTION = timedelta(seconds=60)
# An account's email is its username too: the username field's length bounds it.
EMAIL_MAX_CHARS = get_user_model()._meta.get_field("username").max_length
KEY_NAME_MAX_CHARS = ApiKey._meta.get_field("name").max_length

User = get_user_model()


def _hash_key(plaintext: str) -> str:
    secret = settings.API_KEY_HASH_SECRET.encode()
    return hmac.new(secret, plaintext.encode(), hashlib.sha256).hexdigest()


@transaction.atomic
def organization_create(*, name: str, owner, project_name: str = "Default") -> Organization:
    name = (name or "").strip()
    if not name:
        raise Invalid("Organization name is required.", field="organization")
    org = Organization.objects.create(name=name)
    Project.objects.create(organization=org, name=project_name)
    Membership.objects.create(user=owner, organization=org, role=Role.OWNER)
    return org


@transaction.atomic
def user_create(*, email: str, password: str) -> AbstractBaseUser:
    """A new account for `email` (lowercased), with no organization yet."""
    email = (email or "").strip().lower()
    if not email or "@" not in email:
        raise Invalid("Enter a valid email address.", field="email")
    if len(email) > EMAIL_MAX_CHARS:
        raise Invalid(
            f"Email addresses are limited to {EMAIL_MAX_CHARS} characters.", field="email"
        )
    if User.objects.filter(email__iexact=email).exists():
        raise Invalid("An account with this email already exists.", field="email")
    try:
        validate_password(password)
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field="password") from None
    try:
        with transaction.atomic():
            return User.objects.create_user(username=email, email=email, password=password)
    except IntegrityError:  # a concurrent sign-up took the email
        raise Invalid("An account with this email already exists.", field="email") from None


@transaction.atomic
def user_signup(*, email: str, password: str, organization_name: str):
    user = user_create(email=email, password=password)
    organization_create(name=organization_name or user.email.split("@")[0], owner=user)
    return user


@transaction.atomic
def project_create(*, organization: Organization, name: str) -> Project:
    name = (name or "").strip()
    if not name:
        raise Invalid("Project name is required.", field="name")
    if Project.objects.filter(organization=organization, name=name).exists():
        raise Invalid(f"A project named {name!r} already exists.", field="name")
    return Project.objects.create(organization=organization, name=name)


@transaction.atomic
def project_settings_update(
    *, project: Project, chinese_models_allowed: bool, actor=None
) -> Project:
    """Change the project's settings (who may is the caller's check); audit-recorded."""
    if not isinstance(chinese_models_allowed, bool):
        raise Invalid(
            "chinese_models_allowed must be true or false.", field="chinese_models_allowed"
        )
    locked = Project.objects.select_for_update().get(pk=project.pk)
    before = locked.chinese_models_allowed
    if before != chinese_models_allowed:
        locked.chinese_models_allowed = chinese_models_allowed
        locked.save(update_fields=["chinese_models_allowed"])
        audit.audit_record(
            action=audit.PROJECT_CHANGE,
            organization=locked.organization,
            target=locked.pk,
            metadata={
                "project": locked.name,
                "chinese_models_allowed": {"before": before, "after": chinese_models_allowed},
            },
            actor=actor,
        )
    project.chinese_models_allowed = chinese_models_allowed
    return project


def api_key_create(
    *, project: Project, name: str, created_by=None, kind: str = ApiKey.Kind.PROJECT
) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the plaintext, which is never stored."""
    name = (name or "").strip()
    if not name:
        raise Invalid("Key name is required.", field="name")
    if len(name) > KEY_NAME_MAX_CHARS:
        raise Invalid(f"Key name must be at most {KEY_NAME_MAX_CHARS} characters.", field="name")
    for _ in range(5):
        plaintext = KEY_PREFIX + secrets.token_urlsafe(30).replace("-", "a").replace("_", "b")
        prefix = plaintext[len(KEY_PREFIX) : len(KEY_PREFIX) + _PREFIX_LEN]
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(
                    project=project,
                    name=name,
                    kind=kind,
                    prefix=prefix,
                    hashed=_hash_key(plaintext),
                    created_by=created_by,
                )
        except IntegrityError:  # prefix collision: draw again
            continue
        if kind == ApiKey.Kind.PROJECT:  # run keys are minted and revoked with their run
            audit.audit_record(
                action=audit.KEY_CREATE,
                organization=project.organization,
                target=f"{key.name} ({key.prefix}…)",
                metadata={"project": project.pk},
                actor=created_by,
            )
        return key, plaintext
    raise Unavailable("Could not create a key; try again.")


def api_key_revoke(*, key: ApiKey, actor=None) -> ApiKey:
    """Revoke a key (once). `actor`: who did it, by default whoever makes the request."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        if key.kind == ApiKey.Kind.PROJECT:
            audit.audit_record(
                action=audit.KEY_REVOKE,
                organization=key.project.organization,
                target=f"{key.name} ({key.prefix}…)",
                metadata={"project": key.project_id},
                actor=actor,
            )
    return key


# The key with its project and the project's organization, as select_related would give
# them, from one SQL text made once: every API request (each ingest batch among them)
# authenticates, and building that ORM query cost more than running it. On PostgreSQL the
# fields have no converters (a test compares this with the ORM's reading).
_KEY_MODELS = (ApiKey, Project, Organization)


@functools.cache
def _key_query() -> tuple[str, list[list[str]]]:
    columns, attnames = [], []
    for model, alias in zip(_KEY_MODELS, ("k", "p", "o"), strict=True):
        fields = model._meta.concrete_fields
        columns += [f'{alias}."{f.column}"' for f in fields]
        attnames.append([f.attname for f in fields])
    key_project = ApiKey._meta.get_field("project").column
    project_organization = Project._meta.get_field("organization").column
    sql = (
        f"SELECT {', '.join(columns)} FROM {ApiKey._meta.db_table} AS k "
        f'JOIN {Project._meta.db_table} AS p ON p."{Project._meta.pk.column}" = k."{key_project}" '
        f"JOIN {Organization._meta.db_table} AS o "
        f'ON o."{Organization._meta.pk.column}" = p."{project_organization}" '
        f'WHERE k."prefix" = %s AND k."revoked_at" IS NULL LIMIT 1'
    )
    return sql, attnames


def _active_key_with_project(prefix: str) -> ApiKey | None:
    sql, attnames = _key_query()
    with connection.cursor() as cursor:
        cursor.execute(sql, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    instances, start = [], 0
    for model, names in zip(_KEY_MODELS, attnames, strict=True):
        instances.append(model.from_db(connection.alias, names, row[start : start + len(names)]))
        start += len(names)
    key, project, organization = instances
    project.organization = organization
    key.project = project
    return key


def api_key_active(plaintext: str) -> ApiKey | None:
    """The active (unrevoked) key for this plaintext with its project, or None."""
    if not plaintext or not plaintext.startswith(KEY_PREFIX):
        return None
    prefix = plaintext[len(KEY_PREFIX) : len(KEY_PREFIX) + _PREFIX_LEN]
    key = _active_key_with_project(prefix)
    if key is None or not hmac.compare_digest(key.hashed, _hash_key(plaintext)):
        return None
    return key


def api_key_authenticate(plaintext: str) -> ApiKey | None:
    """The active key for this plaintext, or None. Records last_used_at (coarsely)."""
    key = api_key_active(plaintext)
    if key is None:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key
