"""The audit log: who did what, from where. Services call audit_record(); nothing updates it.

The request being served (set by AuditContextMiddleware) gives the address and, unless the
caller names one, the actor: the signed-in user or the API key behind the request.
"""

import contextvars
import ipaddress
import logging

from django.contrib.auth import get_user_model

from belvedir.models import ApiKey, AuditEvent, Membership, Organization

log = logging.getLogger(__name__)
_request = contextvars.ContextVar("belvedir_audit_request", default=None)

# What is recorded (action names are stable: filters and exports use them).
LOGIN = "login"
LOGIN_FAILED = "login.failed"
LOGOUT = "logout"
KEY_CREATE = "key.create"
KEY_REVOKE = "key.revoke"
MEMBER_INVITE = "member.invite"
MEMBER_INVITE_CANCEL = "member.invite_cancel"
MEMBER_JOIN = "member.join"
MEMBER_ROLE_CHANGE = "member.role_change"
MEMBER_REMOVE = "member.remove"
RUN_LAUNCH = "run.launch"
RUN_CANCEL = "run.cancel"
BILLING_CHANGE = "billing.change"
PROJECT_CHANGE = "project.change"
MODEL_UPLOAD = "model.upload"
MODEL_DELETE = "model.delete"
HF_TOKEN_CHANGE = "hf_token.change"  # set or removed; never the token


def request_bind(request):
    """Make `request` the one audit records read their address and actor from."""
    return _request.set(request)


def request_unbind(token) -> None:
    _request.reset(token)


def _ip(request) -> str | None:
    raw = (request.META.get("REMOTE_ADDR") or "") if request is not None else ""
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return None


def _actor(actor) -> tuple[object | None, ApiKey | None, str]:
    if actor is None:
        return None, None, "system"
    key = actor if isinstance(actor, ApiKey) else getattr(actor, "key", None)
    if isinstance(key, ApiKey):
        return None, key, f"key {key.prefix}… ({key.name})"[:200]
    if getattr(actor, "pk", None) is None:
        return None, None, "anonymous"
    return actor, None, (getattr(actor, "email", "") or str(actor))[:200]


def audit_record(
    *,
    action: str,
    organization: Organization | None,
    target: str = "",
    metadata: dict | None = None,
    actor=None,
) -> AuditEvent:
    """Append one event. `actor`: a user or an ApiKey; by default whoever makes the request."""
    request = _request.get()
    if actor is None and request is not None:
        actor = getattr(request, "user", None)
    user, key, label = _actor(actor)
    return AuditEvent.objects.create(
        organization=organization,
        actor_user=user,
        actor_key=key,
        actor_label=label,
        action=action,
        target=str(target)[:200],
        metadata=metadata or {},
        ip=_ip(request),
    )


def audit_record_for_account(*, action: str, email: str, actor=None) -> None:
    """An event about an account (a login), in the log of every organization it belongs to
    (an unknown email's only in the admin's)."""
    user = get_user_model().objects.filter(email__iexact=email).first() if email else None
    orgs = (
        list(
            Organization.objects.filter(
                pk__in=Membership.objects.filter(user=user).values("organization_id")
            )
        )
        if user is not None
        else []
    )
    for org in orgs or [None]:
        audit_record(action=action, organization=org, target=email[:200], actor=actor)


# Django's auth signals: the login views (the site's and the admin's) are Django's own.


def _on_login(sender, request, user, **kwargs) -> None:
    audit_record_for_account(action=LOGIN, email=user.email, actor=user)


def _on_logout(sender, request, user, **kwargs) -> None:
    if user is not None:
        audit_record_for_account(action=LOGOUT, email=user.email, actor=user)


def _on_login_failed(sender, credentials, request=None, **kwargs) -> None:
    email = str((credentials or {}).get("username") or "").strip().lower()
    audit_record_for_account(action=LOGIN_FAILED, email=email, actor=_Anonymous())


class _Anonymous:
    pk = None


def connect_signals() -> None:
    from django.contrib.auth import signals

    signals.user_logged_in.connect(_on_login, dispatch_uid="audit-login")
    signals.user_logged_out.connect(_on_logout, dispatch_uid="audit-logout")
    signals.user_login_failed.connect(_on_login_failed, dispatch_uid="audit-login-failed")
