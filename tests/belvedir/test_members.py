"""Membership services: invitations and accepting them, role changes, removals, and the rule
that an organization always keeps an owner (also when two owners act at once)."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.utils import timezone

from belvedir import members
from belvedir.errors import Forbidden, Invalid, NotFound
from belvedir.models import AuditEvent, Invitation, Membership, Role


def _membership(tenant) -> Membership:
    return Membership.objects.get(user=tenant.user, organization=tenant.org)


def _user(email: str):
    return get_user_model().objects.create_user(username=email, email=email, password="pw-long-9")


def test_an_invitation_is_pending_stores_only_a_hash_of_its_token_and_is_emailed(
    owner, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        invitation, token = members.invitation_create(
            organization=owner.org, email="New@Example.com", role="admin", invited_by=owner.user
        )
    assert invitation.email == "new@example.com" and invitation.is_pending()
    assert invitation.invited_by == owner.user and invitation.expires_at > timezone.now()
    assert token not in invitation.token_hash and len(token) >= 40
    assert not Membership.objects.filter(user__email="new@example.com").exists()
    (message,) = mail.outbox
    assert message.to == ["new@example.com"]
    assert members.invitation_link(token) in message.body and "Acme" in message.subject
    event = AuditEvent.objects.get(organization=owner.org, action="member.invite")
    assert event.target == "new@example.com" and event.metadata == {"role": "admin"}


def test_inviting_an_address_with_an_account_looks_exactly_like_inviting_a_new_one(owner):
    _user("known@example.com")
    known, _ = members.invitation_create(
        organization=owner.org, email="known@example.com", role="member", invited_by=owner.user
    )
    unknown, _ = members.invitation_create(
        organization=owner.org, email="unknown@example.com", role="member", invited_by=owner.user
    )
    assert known.is_pending() and unknown.is_pending()
    assert not Membership.objects.filter(organization=owner.org, user__email="known@example.com")


def test_inviting_again_replaces_the_pending_invitation_and_its_link(owner):
    first, first_token = members.invitation_create(
        organization=owner.org, email="a@example.com", role="member", invited_by=owner.user
    )
    members.invitation_create(
        organization=owner.org, email="a@example.com", role="admin", invited_by=owner.user
    )
    assert Invitation.objects.filter(email="a@example.com").get().role == "admin"
    assert members.invitation_for_token(token=first_token) is None


@pytest.mark.parametrize(
    "email,role,field",
    [
        ("not-an-email", "member", "email"),
        ("a@example.com", "owner", "role"),
        ("a@b.co", "x", "role"),
    ],
)
def test_bad_invitations_are_refused_naming_the_field(owner, email, role, field):
    with pytest.raises(Invalid) as refused:
        members.invitation_create(
            organization=owner.org, email=email, role=role, invited_by=owner.user
        )
    assert refused.value.field == field
    assert not Invitation.objects.exists()


def test_inviting_a_current_member_is_refused(owner, readonly):
    with pytest.raises(Invalid, match="already a member"):
        members.invitation_create(
            organization=owner.org, email="RO@example.com", role="admin", invited_by=owner.user
        )


def test_the_invited_user_accepts_and_joins_with_the_invited_role(owner):
    invited = _user("joiner@example.com")
    _, token = members.invitation_create(
        organization=owner.org, email="joiner@example.com", role="readonly", invited_by=owner.user
    )
    membership = members.invitation_accept(token=token, user=invited)
    assert membership.organization == owner.org and membership.role == Role.READONLY
    assert Invitation.objects.get().accepted_at is not None
    assert members.invitation_for_token(token=token) is None
    with pytest.raises(NotFound):  # a link works once
        members.invitation_accept(token=token, user=invited)
    assert AuditEvent.objects.filter(organization=owner.org, action="member.join").count() == 1


def test_another_address_cannot_accept_an_invitation(owner, outsider):
    _, token = members.invitation_create(
        organization=owner.org, email="joiner@example.com", role="admin", invited_by=owner.user
    )
    with pytest.raises(Forbidden, match="joiner@example.com"):
        members.invitation_accept(token=token, user=outsider.user)
    assert not Membership.objects.filter(user=outsider.user, organization=owner.org).exists()


def test_an_expired_invitation_cannot_be_accepted(owner):
    invited = _user("late@example.com")
    _, token = members.invitation_create(
        organization=owner.org, email="late@example.com", role="member", invited_by=owner.user
    )
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(NotFound, match="not valid"):
        members.invitation_accept(token=token, user=invited)


def test_a_new_address_signs_up_through_the_link_and_joins(owner):
    _, token = members.invitation_create(
        organization=owner.org, email="fresh@example.com", role="member", invited_by=owner.user
    )
    user = members.invitation_signup(token=token, password="a-good-password-9")
    assert user.email == "fresh@example.com" and user.check_password("a-good-password-9")
    assert [m.organization for m in Membership.objects.filter(user=user)] == [owner.org]


def test_owners_change_roles_and_the_change_is_audited(owner, member):
    target = _membership(member)
    changed = members.membership_role_change(
        organization=owner.org, member_id=target.public_id, role="admin", by=owner.user
    )
    assert changed.role == Role.ADMIN and _membership(member).role == Role.ADMIN
    event = AuditEvent.objects.get(organization=owner.org, action="member.role_change")
    assert event.target == "member@example.com"
    assert event.metadata == {"from": "member", "to": "admin"}


def test_an_admin_cannot_touch_an_owner_or_make_one(owner, member):
    Membership.objects.filter(user=member.user).update(role=Role.ADMIN)
    own = _membership(owner).public_id
    with pytest.raises(Forbidden):
        members.membership_role_change(
            organization=owner.org, member_id=own, role="member", by=member.user
        )
    with pytest.raises(Forbidden):
        members.membership_remove(organization=owner.org, member_id=own, by=member.user)
    with pytest.raises(Forbidden):
        members.membership_role_change(
            organization=owner.org,
            member_id=_membership(member).public_id,
            role="owner",
            by=member.user,
        )


def test_plain_and_read_only_members_cannot_change_anyone(owner, member, readonly):
    for actor in (member, readonly):
        with pytest.raises(Forbidden):
            members.membership_remove(
                organization=owner.org, member_id=_membership(owner).public_id, by=actor.user
            )
    assert Membership.objects.filter(organization=owner.org).count() == 3


def test_a_member_of_another_organization_is_not_found(owner, outsider):
    with pytest.raises(NotFound):
        members.membership_remove(
            organization=owner.org, member_id=_membership(outsider).public_id, by=owner.user
        )
    assert Membership.objects.filter(user=outsider.user).exists()


def test_removing_a_member_deletes_the_membership_and_is_audited(owner, member):
    members.membership_remove(
        organization=owner.org, member_id=_membership(member).public_id, by=owner.user
    )
    assert not Membership.objects.filter(user=member.user).exists()
    event = AuditEvent.objects.get(organization=owner.org, action="member.remove")
    assert event.target == "member@example.com" and event.actor_user == owner.user


def test_the_last_owner_can_be_neither_removed_nor_demoted(owner):
    own = _membership(owner).public_id
    with pytest.raises(Invalid, match="at least one owner"):
        members.membership_remove(organization=owner.org, member_id=own, by=owner.user)
    with pytest.raises(Invalid, match="at least one owner"):
        members.membership_role_change(
            organization=owner.org, member_id=own, role="admin", by=owner.user
        )
    assert _membership(owner).role == Role.OWNER


def test_with_a_second_owner_an_owner_can_leave(owner, member):
    Membership.objects.filter(user=member.user).update(role=Role.OWNER)
    members.membership_remove(
        organization=owner.org, member_id=_membership(owner).public_id, by=owner.user
    )
    assert list(
        Membership.objects.filter(organization=owner.org).values_list("role", flat=True)
    ) == ["owner"]


@pytest.mark.django_db(transaction=True)
def test_two_owners_removing_each_other_at_once_leave_one_owner(owner, member):
    """The organization row lock serializes them: the second sees one owner left and stops."""
    Membership.objects.filter(user=member.user).update(role=Role.OWNER)
    pairs = [(owner, member), (member, owner)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def remove(actor, target_id):
        try:
            barrier.wait()
            members.membership_remove(organization=owner.org, member_id=target_id, by=actor.user)
            outcomes.append("removed")
        except (Invalid, Forbidden, NotFound) as exc:
            outcomes.append(type(exc).__name__)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=remove, args=(actor, _membership(target).public_id))
        for actor, target in pairs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # The one who was removed first has no membership left to act with (Forbidden), or sees
    # the last-owner rule (Invalid): either way exactly one removal happened.
    assert outcomes.count("removed") == 1, outcomes
    assert Membership.objects.filter(organization=owner.org, role=Role.OWNER).count() == 1
