"""Membership writes: invitations, accepting them, role changes and removals.

An organization always keeps an owner: changes that would leave it none are refused under a
row lock on the organization, so two owners removing each other at once cannot both succeed.
"""

import hashlib
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from belvedir import audit, services
from belvedir.errors import Forbidden, Invalid, NotFound
from belvedir.models import MANAGE_ROLES, Invitation, Membership, Organization, Role

log = logging.getLogger(__name__)

INVITE_ROLES = (Role.ADMIN, Role.MEMBER, Role.READONLY)
LAST_OWNER = "An organization keeps at least one owner: make someone else an owner first."
INVALID_LINK = "This invitation link is not valid any more; ask for a new invitation."


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_link(token: str) -> str:
    """The absolute link an invitee opens (on the platform's public URL)."""
    path = reverse("invitation", kwargs={"token": token})
    return settings.BELVEDIR_BASE_URL.rstrip("/") + path


def _lock(organization: Organization) -> Organization:
    return Organization.objects.select_for_update().get(pk=organization.pk)


def _send_invitation_email(*, invitation: Invitation, link: str, inviter_email: str) -> None:
    org = invitation.organization.name
    send_mail(
        subject=f"You are invited to {org} on Belvedir Benchmarks",
        message=(
            f"{inviter_email or 'Someone'} invited you to join {org} on Belvedir Benchmarks as "
            f"{invitation.get_role_display().lower()}.\n\nAccept the invitation: {link}\n\n"
            f"The link works until {invitation.expires_at:%Y-%m-%d %H:%M} UTC."
        ),
        from_email=None,
        recipient_list=[invitation.email],
    )


@transaction.atomic
def invitation_create(
    *, organization: Organization, email: str, role: str, invited_by: AbstractBaseUser | None
) -> tuple[Invitation, str]:
    """A pending invitation for `email`; returns it and its token (shown once, stored hashed).

    The answer is the same whether or not the address has an account; the link is also
    emailed (after commit; a mail failure is logged, the invitation stands).
    """
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise Invalid("Enter a valid email address.", field="email") from None
    if role not in INVITE_ROLES:
        names = ", ".join(Role(r).label.lower() for r in INVITE_ROLES)
        raise Invalid(f"Invite as one of: {names}.", field="role")
    org = _lock(organization)
    if Membership.objects.filter(organization=org, user__email__iexact=email).exists():
        raise Invalid(f"{email} is already a member of {org.name}.", field="email")
    # A new invitation replaces a pending (or expired) one for the same address.
    Invitation.objects.filter(organization=org, email=email, accepted_at__isnull=True).delete()
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    invitation = Invitation.objects.create(
        organization=org,
        email=email,
        role=role,
        token_hash=_token_hash(token),
        invited_by=invited_by,
        created_at=now,
        expires_at=now + timedelta(days=settings.BELVEDIR_INVITATION_DAYS),
    )
    audit.audit_record(
        action=audit.MEMBER_INVITE,
        organization=org,
        target=email,
        metadata={"role": role},
        actor=invited_by,
    )
    link = invitation_link(token)
    inviter_email = getattr(invited_by, "email", "")
    transaction.on_commit(
        lambda: _send_invitation_email(
            invitation=invitation, link=link, inviter_email=inviter_email
        ),
        robust=True,
    )
    return invitation, token


def invitation_for_token(*, token: str) -> Invitation | None:
    """The pending, unexpired invitation behind a link, else None."""
    invitation = (
        Invitation.objects.select_related("organization", "invited_by")
        .filter(token_hash=_token_hash(token or ""))
        .first()
    )
    return invitation if invitation is not None and invitation.is_pending() else None


@transaction.atomic
def invitation_accept(*, token: str, user: AbstractBaseUser) -> Membership:
    """`user` joins the invitation's organization; their email must be the invited one."""
    invitation = (
        Invitation.objects.select_for_update().filter(token_hash=_token_hash(token or "")).first()
    )
    if invitation is None or not invitation.is_pending():
        raise NotFound(INVALID_LINK)
    if (user.email or "").lower() != invitation.email.lower():
        raise Forbidden(
            f"This invitation is for {invitation.email}; sign in with that address to accept it."
        )
    membership, created = Membership.objects.get_or_create(
        user=user, organization=invitation.organization, defaults={"role": invitation.role}
    )
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    if created:
        audit.audit_record(
            action=audit.MEMBER_JOIN,
            organization=invitation.organization,
            target=user.email,
            metadata={"role": membership.role, "invitation": invitation.pk},
            actor=user,
        )
    return membership


@transaction.atomic
def invitation_signup(*, token: str, password: str) -> AbstractBaseUser:
    """A new account for the invited address, joined to the organization."""
    invitation = invitation_for_token(token=token)
    if invitation is None:
        raise NotFound(INVALID_LINK)
    user = services.user_create(email=invitation.email, password=password)
    invitation_accept(token=token, user=user)
    return user


@transaction.atomic
def invitation_cancel(
    *, organization: Organization, invitation_id: str, by: AbstractBaseUser
) -> Invitation:
    org = _lock(organization)
    _actor_role(org, by)
    invitation = Invitation.objects.filter(
        organization=org, pk=invitation_id, accepted_at__isnull=True
    ).first()
    if invitation is None:
        raise NotFound("Not found.")
    invitation.delete()
    audit.audit_record(
        action=audit.MEMBER_INVITE_CANCEL, organization=org, target=invitation.email, actor=by
    )
    return invitation


def _actor_role(org: Organization, by: AbstractBaseUser) -> str:
    role = Membership.objects.filter(organization=org, user=by).values_list("role", flat=True)
    role = role.first()
    if role not in MANAGE_ROLES:
        raise Forbidden("Only owners and admins can do this.")
    return role


def _target(org: Organization, member_id: str, actor_role: str) -> Membership:
    target = (
        Membership.objects.select_related("user")
        .filter(organization=org, public_id=member_id)
        .first()
    )
    if target is None:
        raise NotFound("Not found.")
    if target.role == Role.OWNER and actor_role != Role.OWNER:
        raise Forbidden("Only owners can change or remove an owner.")
    return target


def _owner_count(org: Organization) -> int:
    return Membership.objects.filter(organization=org, role=Role.OWNER).count()


@transaction.atomic
def membership_role_change(
    *, organization: Organization, member_id: str, role: str, by: AbstractBaseUser
) -> Membership:
    if role not in Role.values:
        raise Invalid(f"Role must be one of {', '.join(Role.values)}.", field="role")
    org = _lock(organization)
    actor_role = _actor_role(org, by)
    target = _target(org, member_id, actor_role)
    if role == Role.OWNER and actor_role != Role.OWNER:
        raise Forbidden("Only owners can make someone an owner.")
    if target.role == role:
        return target
    if target.role == Role.OWNER and _owner_count(org) <= 1:
        raise Invalid(LAST_OWNER, field="role", code="last_owner")
    previous = target.role
    target.role = role
    target.save(update_fields=["role"])
    audit.audit_record(
        action=audit.MEMBER_ROLE_CHANGE,
        organization=org,
        target=target.user.email,
        metadata={"from": previous, "to": role},
        actor=by,
    )
    return target


@transaction.atomic
def membership_remove(
    *, organization: Organization, member_id: str, by: AbstractBaseUser
) -> Membership:
    org = _lock(organization)
    actor_role = _actor_role(org, by)
    target = _target(org, member_id, actor_role)
    if target.role == Role.OWNER and _owner_count(org) <= 1:
        raise Invalid(LAST_OWNER, code="last_owner")
    target.delete()
    audit.audit_record(
        action=audit.MEMBER_REMOVE,
        organization=org,
        target=target.user.email,
        metadata={"role": target.role},
        actor=by,
    )
    return target
