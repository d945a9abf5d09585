"""The organization page: inviting, accepting through the link, roles, removals, new projects."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from belvedir.access import SESSION_PROJECT
from belvedir.models import Invitation, Membership, Project, Role

INVITE = "/settings/organization/members/new/"
HTMX = {"HTTP_HX_REQUEST": "true"}


def _member_id(tenant) -> str:
    return Membership.objects.get(user=tenant.user, organization=tenant.org).public_id


def _invite(tenant, email: str, role: str = "member", **extra):
    return tenant.web.post(INVITE, {"invite-email": email, "invite-role": role}, **extra)


def _link(html: str) -> str:
    return re.search(r"https?://[^\s<]+/invitations/[\w-]+/", html).group(0)


def test_inviting_redirects_and_shows_the_link_once(owner):
    response = _invite(owner, "new@example.com")
    assert response.status_code == 303 and response["Location"] == "/settings/organization/"
    html = owner.web.get("/settings/organization/").content.decode()
    assert "Invitation for new@example.com created." in html
    assert Invitation.objects.get().email == "new@example.com"
    link = _link(html)
    assert link not in owner.web.get("/settings/organization/").content.decode()


def test_the_inviters_message_is_the_same_for_a_new_and_an_existing_address(
    owner, django_capture_on_commit_callbacks
):
    get_user_model().objects.create_user(username="known@example.com", email="known@example.com")
    pages = []
    for email in ("known@example.com", "unknown@example.com"):
        with django_capture_on_commit_callbacks(execute=True):
            response = _invite(owner, email, **HTMX)
        assert response.status_code == 200
        notice = re.search(
            r'<div class="secret" id="new-invitation".*?</div>', response.content.decode(), re.S
        )
        pages.append(
            re.sub(r"https?://\S+/invitations/[\w-]+/", "LINK", notice.group(0)).replace(email, "E")
        )
    assert pages[0] == pages[1] and "created" in pages[0]
    assert sorted(m.to[0] for m in mail.outbox) == ["known@example.com", "unknown@example.com"]


def test_an_invite_with_bad_input_is_400_naming_the_field(owner):
    response = _invite(owner, "not-an-email")
    assert response.status_code == 400
    assert 'data-field="email"' in response.content.decode()
    response = _invite(owner, "a@example.com", role="owner")
    assert response.status_code == 400 and 'data-field="role"' in response.content.decode()
    assert not Invitation.objects.exists()


def test_an_invite_error_over_htmx_is_the_membership_fragment(owner, readonly):
    response = _invite(owner, "ro@example.com", **HTMX)
    html = response.content.decode()
    assert response.status_code == 400 and "already a member" in html
    assert html.lstrip().startswith('<section id="membership">') and "<html" not in html


def test_read_only_and_plain_members_cannot_invite_and_see_disabled_fields(readonly, member):
    for tenant in (readonly, member):
        assert _invite(tenant, "x@example.com").status_code == 403
        html = tenant.web.get("/settings/organization/").content.decode()
        assert re.search(r"<fieldset\s+disabled", html)
        assert re.search(r'<select name="role"[^>]*\s+disabled', html)
    assert not Invitation.objects.exists()


def test_the_invitation_link_page_offers_log_in_and_sign_up_to_a_visitor(owner, client):
    _invite(owner, "new@example.com")
    link = _link(owner.web.get("/settings/organization/").content.decode())
    html = client.get(link).content.decode()
    assert "Join Acme" in html and "new@example.com" in html
    assert "Log in to accept" in html and "Create account and join" in html


def test_an_unknown_invitation_link_is_404(client, db):
    assert client.get("/invitations/nope/").status_code == 404


def test_the_invited_user_accepts_while_signed_in_and_lands_in_the_organization(owner, client):
    invited = get_user_model().objects.create_user(
        username="inv@example.com", email="inv@example.com", password="pw-long-9"
    )
    _invite(owner, "inv@example.com", role="admin")
    link = _link(owner.web.get("/settings/organization/").content.decode())
    client.force_login(invited)
    assert "Accept and join Acme" in client.get(link).content.decode()
    response = client.post(link + "accept/")
    assert response.status_code == 303
    assert Membership.objects.get(user=invited, organization=owner.org).role == Role.ADMIN
    assert client.session[SESSION_PROJECT] == owner.project.pk


def test_someone_signed_in_as_another_address_cannot_accept(owner, outsider):
    _invite(owner, "inv@example.com")
    link = _link(owner.web.get("/settings/organization/").content.decode())
    assert "Log out" in outsider.web.get(link).content.decode()
    assert outsider.web.post(link + "accept/").status_code == 403
    assert not Membership.objects.filter(user=outsider.user, organization=owner.org).exists()


def test_a_new_address_signs_up_through_the_link_and_joins(owner, client):
    _invite(owner, "fresh@example.com")
    link = _link(owner.web.get("/settings/organization/").content.decode())
    short = client.post(link + "signup/", {"password": "short"})
    assert short.status_code == 400 and 'data-field="password"' in short.content.decode()
    response = client.post(link + "signup/", {"password": "a-good-password-9"})
    assert response.status_code == 303
    user = get_user_model().objects.get(email="fresh@example.com")
    assert [m.organization for m in Membership.objects.filter(user=user)] == [owner.org]
    assert client.get("/settings/organization/").status_code == 200


def test_an_owner_changes_a_role_and_gets_the_fragment_over_htmx(owner, member):
    url = f"/settings/organization/members/{_member_id(member)}/role/"
    response = owner.web.post(url, {"role": "readonly"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<section id="membership">')
    assert "member@example.com is now read-only member." in html
    assert Membership.objects.get(user=member.user).role == Role.READONLY


def test_role_change_refusals(owner, member, readonly, outsider):
    url = f"/settings/organization/members/{_member_id(member)}/role/"
    assert owner.web.post(url, {"role": "boss"}).status_code == 400
    assert readonly.web.post(url, {"role": "admin"}).status_code == 403
    assert outsider.web.post(url, {"role": "admin"}).status_code == 404
    assert owner.web.get(url).status_code == 405
    assert Membership.objects.get(user=member.user).role == Role.MEMBER


def test_an_owner_removes_a_member(owner, member):
    response = owner.web.post(f"/settings/organization/members/{_member_id(member)}/remove/")
    assert response.status_code == 303
    assert not Membership.objects.filter(user=member.user).exists()
    assert member.web.get("/settings/organization/").status_code == 404


def test_removal_refusals(owner, member, readonly, outsider):
    url = f"/settings/organization/members/{_member_id(member)}/remove/"
    assert readonly.web.post(url).status_code == 403
    assert outsider.web.post(url).status_code == 404
    assert Membership.objects.filter(user=member.user).exists()


def test_the_last_owner_cannot_remove_themselves_and_htmx_shows_why(owner):
    url = f"/settings/organization/members/{_member_id(owner)}/remove/"
    response = owner.web.post(url, **HTMX)
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#page-error"
    assert "at least one owner" in response.content.decode()
    assert Membership.objects.filter(user=owner.user, role=Role.OWNER).exists()


def test_cancelling_an_invitation_removes_it(owner, readonly):
    _invite(owner, "gone@example.com")
    invitation = Invitation.objects.get()
    url = f"/settings/organization/invitations/{invitation.pk}/cancel/"
    assert readonly.web.post(url).status_code == 403
    assert owner.web.post(url).status_code == 303
    assert not Invitation.objects.exists()


def test_creating_a_project_keeps_the_current_one_and_offers_to_switch(owner):
    response = owner.web.post("/settings/organization/projects/new/", {"project-name": "Research"})
    assert response.status_code == 303
    project = Project.objects.get(organization=owner.org, name="Research")
    assert owner.web.session.get(SESSION_PROJECT, owner.project.pk) == owner.project.pk
    html = owner.web.get("/settings/organization/").content.decode()
    assert "You are still in <strong>Default</strong>" in html
    assert f'value="{project.pk}"' in html and "Switch to Research" in html


@pytest.mark.parametrize("name,status", [("Default", 400), ("", 400)])
def test_a_bad_project_name_is_400_naming_name(owner, name, status):
    response = owner.web.post(
        "/settings/organization/projects/new/", {"project-name": name}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == status and 'data-field="name"' in html
    assert html.lstrip().startswith('<form method="post" action="/settings/organization/projects')
    assert owner.org.projects.count() == 1


def test_read_only_member_cannot_create_a_project(readonly):
    url = "/settings/organization/projects/new/"
    assert readonly.web.post(url, {"project-name": "X"}).status_code == 403


def test_an_admin_invites_but_cannot_remove_an_owner(owner, member):
    Membership.objects.filter(user=member.user).update(role=Role.ADMIN)
    assert _invite(member, "new@example.com").status_code == 303
    assert Invitation.objects.get().invited_by == member.user
    url = f"/settings/organization/members/{_member_id(owner)}/remove/"
    assert member.web.post(url).status_code == 403
    html = member.web.get("/settings/organization/").content.decode()
    owner_row = re.search(r'<tr data-member="owner@example.com">.*?</tr>', html, re.S).group(0)
    assert "Remove</button>" not in owner_row and re.search(r"<select[^>]*\s+disabled", owner_row)


def test_an_owner_with_a_co_owner_can_leave_and_is_sent_home(owner, member):
    Membership.objects.filter(user=member.user).update(role=Role.OWNER)
    response = owner.web.post(f"/settings/organization/members/{_member_id(owner)}/remove/")
    assert response.status_code == 303 and response["Location"] == "/"
    assert not Membership.objects.filter(user=owner.user).exists()
    assert Membership.objects.get(user=member.user).role == Role.OWNER


def test_signing_up_through_links_is_limited_per_address_like_the_sign_up_page(
    owner, client, settings
):
    settings.BELVEDIR_SIGNUP_RATE = "1/hour"
    _invite(owner, "fresh@example.com")
    link = _link(owner.web.get("/settings/organization/").content.decode())
    assert client.post(link + "signup/", {"password": "short"}).status_code == 400
    refused = client.post(link + "signup/", {"password": "a-good-password-9"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert not get_user_model().objects.filter(email="fresh@example.com").exists()
