"""Sign-up, log in and out, the project switcher, inviting members, creating projects."""

import pytest
from django.contrib.auth import get_user_model

from belvedir.access import SESSION_PROJECT
from belvedir.models import Membership, Organization, Project, Role
from harnesses.models import Harness

SIGNUP = {"email": "New.Person@Example.com", "password": "long-enough-9", "organization": "Initech"}


def _signed_up_user():
    return get_user_model().objects.get(email="new.person@example.com")


# --- sign-up ----------------------------------------------------------------


def test_sign_up_creates_an_organization_a_default_project_and_an_owner_membership(client, db):
    response = client.post("/signup/", SIGNUP)
    assert response.status_code == 302 and response["Location"] == "/"
    user = _signed_up_user()
    membership = Membership.objects.get(user=user)
    assert membership.role == Role.OWNER
    assert membership.organization.name == "Initech"
    assert [p.name for p in membership.organization.projects.all()] == ["Default"]


def test_sign_up_signs_the_new_user_in(client, db):
    client.post("/signup/", SIGNUP)
    response = client.get("/harnesses/")
    assert response.status_code == 200
    assert "new.person@example.com" in response.content.decode()
    assert "Initech / Default" in response.content.decode()


def test_sign_up_with_a_taken_email_is_400_naming_email(client, owner):
    response = client.post("/signup/", {**SIGNUP, "email": "OWNER@example.com"})
    assert response.status_code == 400
    assert "already exists" in response.content.decode()
    assert response.context["form"].errors["email"]
    assert Organization.objects.count() == 1


@pytest.mark.parametrize(
    "change,field",
    [
        ({"email": "not-an-email"}, "email"),
        ({"password": "short"}, "password"),
        ({"organization": ""}, "organization"),
        ({"email": "a" * 150 + "@example.com"}, "email"),
    ],
)
def test_sign_up_with_bad_input_is_400_naming_the_field(client, db, change, field):
    response = client.post("/signup/", {**SIGNUP, **change})
    assert response.status_code == 400
    assert field in response.context["form"].errors
    assert not Organization.objects.exists()


def test_sign_up_page_renders(client, db):
    response = client.get("/signup/")
    assert response.status_code == 200 and 'name="organization"' in response.content.decode()


# --- log in / out -----------------------------------------------------------


def test_a_user_logs_in_with_email_and_password(client, owner):
    response = client.post(
        "/login/", {"username": "owner@example.com", "password": "correct-horse-9"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/harnesses/").status_code == 200


def test_a_wrong_password_does_not_log_in(client, owner):
    response = client.post(
        "/login/", {"username": "owner@example.com", "password": "wrong-password"}
    )
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session
    assert client.get("/harnesses/").status_code == 302


def test_log_out_ends_the_session(owner):
    response = owner.web.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert owner.web.get("/harnesses/").status_code == 302


def test_a_user_with_no_organization_gets_404_not_a_crash(client, db):
    user = get_user_model().objects.create_user(
        username="lonely@example.com", email="lonely@example.com"
    )
    client.force_login(user)
    assert client.get("/harnesses/").status_code == 404


# --- the project switcher ---------------------------------------------------


def test_the_switcher_lists_every_project_of_every_organization_of_the_user(owner, outsider):
    Project.objects.create(organization=owner.org, name="Second")
    html = owner.web.get("/harnesses/").content.decode()
    assert "Acme / Default" in html and "Acme / Second" in html
    assert "Globex" not in html


def test_switching_project_changes_what_the_pages_show(owner):
    second = Project.objects.create(organization=owner.org, name="Second")
    Harness.objects.create(
        project=owner.project, name="In default", repo_url="https://x.org/a/b", run_command="x"
    )
    Harness.objects.create(
        project=second, name="In second", repo_url="https://x.org/a/b", run_command="x"
    )

    response = owner.web.post("/switch/", {"project": second.pk, "next": "/harnesses/"})
    assert response.status_code == 302 and response["Location"] == "/harnesses/"
    html = owner.web.get("/harnesses/").content.decode()
    assert "In second" in html and "In default" not in html
    assert owner.web.session[SESSION_PROJECT] == second.pk

    owner.web.post("/switch/", {"project": owner.project.pk})
    html = owner.web.get("/harnesses/").content.decode()
    assert "In default" in html and "In second" not in html


def test_switching_to_a_project_of_another_organization_is_404(owner, outsider):
    response = owner.web.post("/switch/", {"project": outsider.project.pk})
    assert response.status_code == 404
    assert owner.web.session.get(SESSION_PROJECT) != outsider.project.pk


def test_switching_to_an_unknown_project_is_404(owner):
    assert owner.web.post("/switch/", {"project": "prj_nope"}).status_code == 404


@pytest.mark.parametrize("next_url", ["https://evil.example/", "//evil.example/x"])
def test_switching_never_redirects_off_site(owner, next_url):
    response = owner.web.post("/switch/", {"project": owner.project.pk, "next": next_url})
    assert response.status_code == 302 and response["Location"] == "/"


def test_switching_needs_a_post(owner):
    assert owner.web.get("/switch/").status_code == 405


def test_login_accepts_the_email_in_any_case(db, client):
    from belvedir import services

    services.user_signup(
        email="Mixed@Example.com", password="correct-horse-9", organization_name="M"
    )
    response = client.post(
        "/login/", {"username": "MIXED@example.COM", "password": "correct-horse-9"}
    )
    assert response.status_code == 302
    assert client.get("/harnesses/").status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/runs?model=%00",
        "/api/v1/runs/run_%00",
        "/api/v1/harnesses/har_%00",
        "/traces/?run=%00",
        "/runs/run_%00/",
    ],
)
def test_a_nul_in_the_url_is_a_400_not_a_500(owner, url):
    assert owner.web.get(url).status_code == 400
