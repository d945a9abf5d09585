"""The project's Chinese-models permission: off by default, changed by owners and admins only
(Project settings, the project API, the admin), every change audit-recorded."""

import pytest
from django.contrib.admin.utils import quote

from belvedir.models import AuditEvent, Project, Role
from tests.helpers.tenants import member_of

HX = {"HTTP_HX_REQUEST": "true"}
TOGGLE = "/settings/project/chinese-models/"
API = "/api/v1/project"


@pytest.fixture
def admin(owner, client_factory):
    return member_of(owner, client_factory, "admin@example.com", Role.ADMIN)


def _allowed(tenant) -> bool:
    return Project.objects.get(pk=tenant.project.pk).chinese_models_allowed


def test_a_new_project_does_not_allow_chinese_models(owner):
    assert not _allowed(owner)
    page = owner.web.get("/settings/project/")
    assert b"Allow Chinese models" in page.content


def test_an_owner_allows_chinese_models_in_project_settings_and_it_is_audited(owner):
    response = owner.web.post(TOGGLE, {"chinese_models_allowed": "1"})
    assert response.status_code == 303
    assert _allowed(owner)
    event = AuditEvent.objects.get(action="project.change")
    assert event.organization == owner.org
    assert event.target == owner.project.pk
    assert event.metadata["chinese_models_allowed"] == {"before": False, "after": True}
    assert event.actor_user == owner.user
    owner.web.post(TOGGLE, {"chinese_models_allowed": "0"})
    assert not _allowed(owner)
    assert AuditEvent.objects.filter(action="project.change").count() == 2


def test_an_admin_changes_it_and_htmx_gets_the_section_back(admin):
    response = admin.web.post(TOGGLE, {"chinese_models_allowed": "1"}, **HX)
    assert response.status_code == 200
    assert b'id="chinese-models"' in response.content
    assert b"Stop allowing Chinese models" in response.content
    assert b"<html" not in response.content
    assert _allowed(admin)


@pytest.mark.parametrize("role", [Role.MEMBER, Role.READONLY])
def test_members_and_read_only_members_cannot_change_it(owner, client_factory, role):
    someone = member_of(owner, client_factory, f"{role}@example.com", role)
    assert someone.web.post(TOGGLE, {"chinese_models_allowed": "1"}).status_code == 403
    assert (
        someone.api.patch(API, {"chinese_models_allowed": True}, format="json").status_code == 403
    )
    assert not _allowed(owner)
    assert (
        b"Only owners and admins can change this." in someone.web.get("/settings/project/").content
    )


def test_the_toggle_takes_only_post(owner):
    assert owner.web.get(TOGGLE).status_code == 405


def test_an_outsider_changes_only_their_own_project(owner, outsider):
    outsider.web.post(TOGGLE, {"chinese_models_allowed": "1"})
    assert _allowed(outsider)
    assert not _allowed(owner)


def test_the_project_api_shows_the_permission(owner):
    body = owner.api.get(API).json()
    assert body["id"] == owner.project.pk
    assert body["chinese_models_allowed"] is False


def test_an_owner_changes_it_through_the_api(owner, client_factory):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(user=owner.user)
    response = api.patch(API, {"chinese_models_allowed": True}, format="json")
    assert response.status_code == 200
    assert response.json()["chinese_models_allowed"] is True
    assert _allowed(owner)
    assert AuditEvent.objects.filter(action="project.change", actor_user=owner.user).exists()


def test_a_project_key_acts_as_a_member_and_cannot_change_it(owner):
    response = owner.api.patch(API, {"chinese_models_allowed": True}, format="json")
    assert response.status_code == 403
    assert not _allowed(owner)


def test_bad_input_is_refused_naming_the_field(admin):
    response = admin.api.patch(API, {"chinese_models_allowed": "maybe"}, format="json")
    assert response.status_code == 400
    assert "chinese_models_allowed" in response.json()
    assert admin.api.patch(API, {}, format="json").status_code == 400
    assert not _allowed(admin)


def test_an_operator_changes_it_in_the_admin_and_it_is_audited(superuser, owner):
    url = f"/admin/belvedir/project/{quote(owner.project.pk)}/change/"  # "_XX" is an escape
    form = {"organization": owner.org.pk, "name": owner.project.name}
    form |= {"chinese_models_allowed": "on", "created_at_0": "2026-01-01", "created_at_1": "00:00"}
    response = superuser.post(url, form)
    assert response.status_code == 302, response.content[:2000]
    assert _allowed(owner)
    event = AuditEvent.objects.get(action="project.change")
    assert event.actor_user == superuser.user


def test_the_organization_pages_project_rows_show_it_read_only(superuser, owner):
    # Changed there it would skip the audit: only the project's own page changes it.
    page = superuser.get(f"/admin/belvedir/organization/{quote(owner.org.pk)}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert owner.project.name in html
    assert "chinese_models_allowed" in html  # shown, as a column
    assert 'name="projects-0-chinese_models_allowed"' not in html


def test_a_project_an_operator_adds_allowing_chinese_models_is_audited(superuser, owner):
    form = {"organization": owner.org.pk, "name": "Second", "chinese_models_allowed": "on"}
    form |= {"created_at_0": "2026-01-01", "created_at_1": "00:00"}
    response = superuser.post("/admin/belvedir/project/add/", form)
    assert response.status_code == 302, response.content[:2000]
    project = Project.objects.get(name="Second")
    assert project.chinese_models_allowed
    event = AuditEvent.objects.get(action="project.change", target=project.pk)
    assert event.metadata["chinese_models_allowed"] == {"before": False, "after": True}
