"""The settings pages: one POST URL per action, each resolving the caller through the access helper."""

import re

import pytest
from django.contrib.auth import get_user_model

from belvedir.models import ApiKey, Invitation, Membership, Project, Role

HX = {"HTTP_HX_REQUEST": "true"}
KEY = re.compile(r"bv_live_[A-Za-z0-9]{20,}")
CREATE_KEY = "/settings/project/keys/new/"
INVITE = "/settings/organization/members/new/"
NEW_PROJECT = "/settings/organization/projects/new/"


@pytest.fixture
def someone(db):
    return get_user_model().objects.create_user(
        username="someone@example.com", email="someone@example.com", password="correct-horse-9"
    )


@pytest.fixture
def nobody(db, client):
    """Signed in, but a member of no organization."""
    user = get_user_model().objects.create_user(
        username="nobody@example.com", email="nobody@example.com", password="correct-horse-9"
    )
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", ["/settings/project/", "/settings/organization/"])
def test_the_settings_pages_take_no_post_each_action_has_its_own_url(owner, url):
    assert owner.web.post(url, {"key-name": "CI", "project-name": "X"}).status_code == 405
    assert not ApiKey.objects.filter(name="CI").exists()
    assert not Project.objects.filter(name="X").exists()


@pytest.mark.parametrize("url", [CREATE_KEY, INVITE, NEW_PROJECT])
def test_each_action_needs_a_post(owner, url):
    assert owner.web.get(url).status_code == 405


@pytest.mark.parametrize("url", [CREATE_KEY, INVITE, NEW_PROJECT])
def test_a_user_of_no_organization_gets_404_from_each_action(nobody, url):
    data = {"key-name": "K", "invite-email": "x@example.com", "invite-role": "member"}
    assert nobody.post(url, {**data, "project-name": "P"}).status_code == 404
    assert not ApiKey.objects.filter(name="K").exists()
    assert not Project.objects.filter(name="P").exists()


# --- API keys ------------------------------------------------------------------------------


def test_an_outsiders_key_lands_in_their_own_project(owner, outsider):
    assert outsider.web.post(CREATE_KEY, {"key-name": "Theirs"}).status_code == 303
    assert ApiKey.objects.get(name="Theirs").project == outsider.project


def test_a_read_only_member_creating_a_key_with_htmx_gets_the_403_in_the_page_error_box(
    readonly,
):
    response = readonly.web.post(CREATE_KEY, {"key-name": "Sneaky"}, **HX)
    assert response.status_code == 403
    assert response["HX-Retarget"] == "#page-error"
    assert not ApiKey.objects.filter(name="Sneaky").exists()


def test_a_key_name_too_long_is_400_naming_the_field(owner):
    response = owner.web.post(CREATE_KEY, {"key-name": "k" * 121})
    assert response.status_code == 400
    assert "name" in response.context["key_form"].errors
    assert not KEY.search(response.content.decode())


def test_revoking_with_htmx_returns_the_keys_section_marked_revoked(owner):
    key = ApiKey.objects.get(project=owner.project)
    response = owner.web.post(f"/settings/project/keys/{key.pk}/revoke/", **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="keys">') and "<header" not in html
    assert "revoked" in html
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_the_keys_forms_post_to_their_own_urls(owner):
    key = ApiKey.objects.get(project=owner.project)
    html = owner.web.get("/settings/project/").content.decode()
    assert f'hx-post="{CREATE_KEY}"' in html and f'action="{CREATE_KEY}"' in html
    assert f'hx-post="/settings/project/keys/{key.pk}/revoke/"' in html


# --- inviting members ----------------------------------------------------------------------


def test_inviting_with_htmx_returns_the_membership_section_with_the_pending_invitation(
    owner, someone
):
    data = {"invite-email": someone.email, "invite-role": "member"}
    response = owner.web.post(INVITE, data, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<section id="membership">')
    assert "/invitations/" in html and 'data-invitation="someone@example.com"' in html
    assert Invitation.objects.get().organization == owner.org
    assert not Membership.objects.filter(user=someone).exists()  # until they accept


def test_inviting_with_htmx_and_bad_input_returns_the_membership_section_with_the_error(owner):
    data = {"invite-email": "not-an-email", "invite-role": "member"}
    response = owner.web.post(INVITE, data, **HX)
    assert response.status_code == 400
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="membership">')
    assert 'data-field="email"' in html and "New project" not in html


def test_an_outsiders_invitation_is_to_their_own_organization(owner, outsider, someone):
    data = {"invite-email": someone.email, "invite-role": "member"}
    assert outsider.web.post(INVITE, data).status_code == 303
    assert Invitation.objects.get().organization == outsider.org


def test_a_read_only_member_cannot_invite_even_with_htmx(readonly, someone):
    data = {"invite-email": someone.email, "invite-role": "admin"}
    response = readonly.web.post(INVITE, data, **HX)
    assert response.status_code == 403
    assert not Membership.objects.filter(user=someone).exists()


# --- creating projects ---------------------------------------------------------------------


def test_creating_a_project_with_htmx_stays_in_the_current_one_and_offers_the_switch(owner):
    response = owner.web.post(NEW_PROJECT, {"project-name": "Research"}, **HX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/settings/organization/"
    project = Project.objects.get(organization=owner.org, name="Research")
    page = owner.web.get("/settings/organization/").content.decode()
    assert f'name="project" value="{project.pk}"' in page
    assert "Default" in owner.web.get("/settings/project/").content.decode()


def test_creating_a_project_with_htmx_and_a_taken_name_returns_only_its_form(owner):
    response = owner.web.post(NEW_PROJECT, {"project-name": "Default"}, **HX)
    assert response.status_code == 400
    html = response.content.decode()
    assert html.lstrip().startswith('<form method="post" action="/settings/organization/projects/')
    assert "already exists" in html and "Invite a member" not in html


def test_a_blank_project_name_is_400_naming_the_field(owner):
    response = owner.web.post(NEW_PROJECT, {"project-name": ""})
    assert response.status_code == 400
    assert "name" in response.context["project_form"].errors


def test_an_outsiders_project_lands_in_their_own_organization(owner, outsider):
    assert outsider.web.post(NEW_PROJECT, {"project-name": "Theirs"}).status_code == 303
    assert Project.objects.get(name="Theirs").organization == outsider.org


def test_a_plain_member_cannot_create_a_project(member):
    Membership.objects.filter(user=member.user).update(role=Role.MEMBER)
    assert member.web.post(NEW_PROJECT, {"project-name": "X"}, **HX).status_code == 403
    assert not Project.objects.filter(name="X").exists()
