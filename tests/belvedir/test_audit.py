"""The audit log: keys, members and roles recorded by the services; owners read their own
organization's log; operators read every one in the admin, and nobody edits it."""

from django.contrib.auth import get_user_model

from belvedir import audit
from belvedir.models import AuditEvent, Membership


def _actions(org) -> list[tuple[str, str]]:
    return [(e.action, e.actor_label) for e in AuditEvent.objects.filter(organization=org)]


def test_key_create_and_revoke_through_the_api_are_recorded_with_the_key_as_actor(owner):
    created = owner.api.post("/api/v1/keys", {"name": "ci"}, format="json").json()
    owner.api.delete(f"/api/v1/keys/{created['id']}")
    events = AuditEvent.objects.filter(organization=owner.org, action__startswith="key.")
    (revoke, create) = events[:2]
    assert (create.action, revoke.action) == ("key.create", "key.revoke")
    assert create.target == revoke.target == f"ci ({created['prefix']}…)"
    assert create.actor_key.name == "tests" and create.actor_label.startswith("key ")
    assert create.ip == "127.0.0.1"


def test_key_revoke_on_the_page_is_recorded_with_the_user_as_actor(owner):
    created = owner.api.post("/api/v1/keys", {"name": "ci"}, format="json").json()
    owner.web.post(f"/settings/project/keys/{created['id']}/revoke/")
    event = AuditEvent.objects.filter(organization=owner.org, action="key.revoke").get()
    assert event.actor_user == owner.user and event.actor_label == "owner@example.com"


def test_an_invitation_is_recorded_with_the_role(owner):
    get_user_model().objects.create_user(username="s@example.com", email="s@example.com")
    owner.web.post(
        "/settings/organization/members/new/",
        {"invite-email": "s@example.com", "invite-role": "admin"},
    )
    event = AuditEvent.objects.get(organization=owner.org, action="member.invite")
    assert event.target == "s@example.com" and event.metadata == {"role": "admin"}
    assert event.actor_user == owner.user


def test_an_operator_changing_a_role_in_the_admin_is_recorded(owner, member, superuser):
    membership = Membership.objects.get(user=member.user)
    response = superuser.post(
        f"/admin/belvedir/membership/{membership.pk}/change/",
        {
            "user": member.user.pk,
            "organization": owner.org.pk,
            "role": "admin",
            "created_at_0": "2026-01-01",
            "created_at_1": "00:00:00",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    event = AuditEvent.objects.get(organization=owner.org, action="member.role_change")
    assert event.target == "member@example.com" and event.metadata["role"] == "admin"
    assert event.actor_user == superuser.user


def test_owners_read_their_organizations_log_and_no_one_elses(owner, outsider):
    audit.audit_record(action=audit.BILLING_CHANGE, organization=owner.org, target="credit $5")
    audit.audit_record(action=audit.BILLING_CHANGE, organization=outsider.org, target="globex $9")
    page = owner.web.get("/settings/organization/audit/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "credit $5" in body and "billing.change" in body and "globex $9" not in body
    assert "Audit log" in owner.web.get("/settings/organization/").content.decode()


def test_members_who_are_not_owners_cannot_read_the_log(owner, readonly, member):
    assert readonly.web.get("/settings/organization/audit/").status_code == 403
    assert member.web.get("/settings/organization/audit/").status_code == 403
    assert "Audit log" not in member.web.get("/settings/organization/").content.decode()


def test_the_log_is_paginated(owner):
    for n in range(55):
        audit.audit_record(action=audit.BILLING_CHANGE, organization=owner.org, target=f"t{n}")
    first = owner.web.get("/settings/organization/audit/").content.decode()
    assert "t54" in first and "t4<" not in first and "Page 1 of 2" in first
    second = owner.web.get("/settings/organization/audit/?page=2").content.decode()
    assert "t4<" in second


def test_the_admin_shows_the_log_read_only(owner, superuser):
    event = audit.audit_record(action=audit.BILLING_CHANGE, organization=owner.org, target="x")
    assert superuser.get("/admin/belvedir/auditevent/").status_code == 200
    assert superuser.get("/admin/belvedir/auditevent/add/").status_code == 403
    page = superuser.get(f"/admin/belvedir/auditevent/{event.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert superuser.post(f"/admin/belvedir/auditevent/{event.pk}/delete/").status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_an_event_without_a_request_is_the_systems(owner):
    event = audit.audit_record(action=audit.RUN_CANCEL, organization=owner.org, target="run_x")
    assert event.actor_label == "system" and event.ip is None
