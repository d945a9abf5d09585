"""Project API keys: created and revoked on the page and in the API, shown once, stored hashed."""

import hashlib
import hmac
import re

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from belvedir import services
from belvedir.models import ApiKey

HX = {"HTTP_HX_REQUEST": "true"}
KEY = re.compile(r"bv_live_[A-Za-z0-9]{20,}")


def _bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def _works(key: str) -> bool:
    return _bearer(key).get("/api/v1/harnesses").status_code == 200


# --- the project settings page ----------------------------------------------


def test_creating_a_key_on_the_page_shows_the_plaintext_once(owner):
    response = owner.web.post("/settings/project/keys/new/", {"key-name": "CI"})
    # See Other: the browser follows with a GET, so a reload never makes a second key.
    assert response.status_code == 303 and response["Location"] == "/settings/project/"
    assert not KEY.search(str(dict(owner.web.session)))  # held encrypted until shown
    html = owner.web.get("/settings/project/").content.decode()
    plaintext = KEY.search(html).group(0)
    assert "not shown again" in html
    assert _works(plaintext)
    key = ApiKey.objects.get(name="CI")
    assert key.project == owner.project and key.created_by == owner.user

    reloaded = owner.web.get("/settings/project/").content.decode()
    assert plaintext not in reloaded and "not shown again" not in reloaded
    assert f"bv_live_{key.prefix}" in reloaded  # the prefix stays visible to tell keys apart


def test_creating_a_key_with_htmx_returns_only_the_keys_section(owner):
    response = owner.web.post("/settings/project/keys/new/", {"key-name": "CI"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="keys">') and "<header" not in html
    assert _works(KEY.search(html).group(0))


def test_a_key_without_a_name_is_400_with_the_error_inline(owner):
    response = owner.web.post("/settings/project/keys/new/", {"key-name": "  "}, **HX)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="errorlist"' in html and "required" in html
    assert not KEY.search(html)
    assert not ApiKey.objects.filter(name="").exists()


def test_read_only_member_sees_keys_and_a_disabled_form_but_cannot_create_one(readonly):
    page = readonly.web.get("/settings/project/")
    html = page.content.decode()
    assert page.status_code == 200 and re.search(r"<fieldset\s+disabled>", html)
    assert "Read-only members cannot create keys." in html
    assert (
        readonly.web.post("/settings/project/keys/new/", {"key-name": "Sneaky"}).status_code == 403
    )
    assert not ApiKey.objects.filter(name="Sneaky").exists()


def test_the_page_lists_only_the_current_projects_project_keys(owner, outsider):
    html = owner.web.get("/settings/project/").content.decode()
    own = ApiKey.objects.get(project=owner.project)
    other = ApiKey.objects.get(project=outsider.project)
    assert own.prefix in html and other.prefix not in html


def test_revoking_a_key_on_the_page_makes_it_401(owner):
    key = ApiKey.objects.get(project=owner.project)
    response = owner.web.post(f"/settings/project/keys/{key.pk}/revoke/")
    assert response.status_code == 303
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert owner.api.get("/api/v1/harnesses").status_code == 401
    assert "revoked" in owner.web.get("/settings/project/").content.decode()


def test_read_only_member_cannot_revoke_a_key(owner, readonly):
    key = ApiKey.objects.get(project=owner.project)
    assert readonly.web.post(f"/settings/project/keys/{key.pk}/revoke/").status_code == 403
    assert _works(owner.key)


def test_outsider_cannot_revoke_another_organizations_key(owner, outsider):
    key = ApiKey.objects.get(project=owner.project)
    assert outsider.web.post(f"/settings/project/keys/{key.pk}/revoke/").status_code == 404
    assert _works(owner.key)


def test_revoking_needs_a_post(owner):
    key = ApiKey.objects.get(project=owner.project)
    assert owner.web.get(f"/settings/project/keys/{key.pk}/revoke/").status_code == 405


# --- the API ----------------------------------------------------------------


def test_post_keys_returns_the_plaintext_once_in_the_201_body(owner):
    response = owner.api.post("/api/v1/keys", {"name": "deploy"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert KEY.fullmatch(body["key"])
    assert body["id"].startswith("key_") and body["name"] == "deploy"
    assert body["key"].startswith(f"bv_live_{body['prefix']}")
    assert _works(body["key"])

    listed = owner.api.get("/api/v1/keys").json()
    assert all("key" not in row and "hashed" not in row for row in listed["results"])
    assert body["key"] not in str(listed)
    detail = owner.api.get(f"/api/v1/keys/{body['id']}").json()
    assert "key" not in detail and body["key"] not in str(detail)


def test_get_keys_lists_the_projects_keys_only(owner, outsider):
    ids = {row["id"] for row in owner.api.get("/api/v1/keys").json()["results"]}
    assert ids == {ApiKey.objects.get(project=owner.project).pk}


def test_delete_key_revokes_it_and_it_then_gets_401(owner):
    created = owner.api.post("/api/v1/keys", {"name": "temp"}, format="json").json()
    response = owner.api.delete(f"/api/v1/keys/{created['id']}")
    assert response.status_code == 200 and response.json()["revoked_at"]
    assert _bearer(created["key"]).get("/api/v1/harnesses").status_code == 401
    assert _works(owner.key)  # the other key still works


def test_a_key_can_revoke_itself(owner):
    own = ApiKey.objects.get(project=owner.project)
    assert owner.api.delete(f"/api/v1/keys/{own.pk}").status_code == 200
    assert owner.api.get("/api/v1/keys").status_code == 401


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "x" * 121}, {"name": None}])
def test_creating_a_key_with_bad_input_is_400_naming_name(owner, body):
    response = owner.api.post("/api/v1/keys", body, format="json")
    assert response.status_code == 400
    assert "name" in response.json()


def test_read_only_member_can_list_keys_but_not_create_or_revoke(owner, readonly):
    key = ApiKey.objects.get(project=owner.project)
    assert readonly.api.get("/api/v1/keys").status_code == 200
    assert readonly.api.get(f"/api/v1/keys/{key.pk}").status_code == 200
    assert readonly.api.post("/api/v1/keys", {"name": "x"}, format="json").status_code == 403
    assert readonly.api.delete(f"/api/v1/keys/{key.pk}").status_code == 403
    assert _works(owner.key)


def test_outsider_gets_404_for_another_organizations_key(owner, outsider):
    key = ApiKey.objects.get(project=owner.project)
    assert outsider.api.get(f"/api/v1/keys/{key.pk}").status_code == 404
    assert outsider.api.delete(f"/api/v1/keys/{key.pk}").status_code == 404
    assert _works(owner.key)


def test_per_run_keys_are_not_listed_or_revocable_as_project_keys(owner):
    run_key, plaintext = services.api_key_create(
        project=owner.project, name="run", kind=ApiKey.Kind.RUN
    )
    assert run_key.pk not in str(owner.api.get("/api/v1/keys").json())
    assert owner.api.delete(f"/api/v1/keys/{run_key.pk}").status_code == 404
    assert _bearer(plaintext).get("/api/v1/harnesses").status_code == 403


def test_anonymous_callers_get_401_with_a_bearer_challenge(db):
    response = APIClient().get("/api/v1/keys")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


# --- authentication and storage ---------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        "Bearer bv_live_notarealkeyatall1234567890",
        "Bearer nope",
        "Bearer bv_live_",
        "Bearer bv_live_" + "a" * 40,
    ],
)
def test_a_bad_key_is_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert client.get("/api/v1/harnesses").status_code == 401


def test_a_key_with_a_right_prefix_but_wrong_secret_is_401(owner):
    forged = owner.key[:-4] + ("aaaa" if not owner.key.endswith("aaaa") else "bbbb")
    assert _bearer(forged).get("/api/v1/harnesses").status_code == 401


def test_bearer_scheme_is_case_insensitive(owner):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"bearer {owner.key}")
    assert client.get("/api/v1/harnesses").status_code == 200


def test_another_scheme_is_not_accepted(owner):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {owner.key}")
    assert client.get("/api/v1/harnesses").status_code == 401


def test_keys_are_stored_as_prefix_and_keyed_hash_never_in_plaintext(owner, settings):
    key = ApiKey.objects.get(project=owner.project)
    row = ApiKey.objects.filter(pk=key.pk).values().get()
    assert all(owner.key not in str(value) for value in row.values())
    secret_part = owner.key[len("bv_live_") :]
    assert all(secret_part not in str(value) for value in row.values())
    assert owner.key.startswith("bv_live_" + key.prefix)
    expected = hmac.new(settings.API_KEY_HASH_SECRET.encode(), owner.key.encode(), hashlib.sha256)
    assert key.hashed == expected.hexdigest()


def test_the_hash_uses_its_own_secret_not_secret_key(owner):
    with override_settings(SECRET_KEY="a-completely-different-secret-key-for-this-test"):
        assert _works(owner.key)
    with override_settings(API_KEY_HASH_SECRET="a-different-api-key-hash-secret"):
        assert not _works(owner.key)
    assert _works(owner.key)


def test_last_used_at_is_recorded_when_a_key_is_used(owner):
    key = ApiKey.objects.get(project=owner.project)
    assert key.last_used_at is None
    assert _works(owner.key)
    key.refresh_from_db()
    assert key.last_used_at is not None
    assert owner.api.get(f"/api/v1/keys/{key.pk}").json()["last_used_at"]


def test_a_key_only_sees_its_own_project(owner):
    from belvedir.models import Project
    from harnesses.models import Harness

    second = Project.objects.create(organization=owner.org, name="Second")
    Harness.objects.create(
        project=second, name="Elsewhere", repo_url="https://x.org/a/b", run_command="x"
    )
    assert owner.api.get("/api/v1/harnesses").json()["count"] == 0
    other = Harness.objects.get(name="Elsewhere")
    assert owner.api.get(f"/api/v1/harnesses/{other.pk}").status_code == 404


def test_openapi_schema_and_docs_are_served(owner):
    schema = owner.web.get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    assert "/api/v1/harnesses" in text and "/api/v1/keys" in text and "/api/v1/catalog" in text
    assert owner.web.get("/api/docs/").status_code == 200


def test_the_browsable_api_works_with_a_project_key(owner):
    response = owner.api.get("/api/v1/harnesses", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"Harness" in response.content


def test_authenticating_reads_the_key_project_and_organization_as_the_orm_does(
    owner, django_assert_num_queries
):
    services.api_key_create(project=owner.project, name="other", created_by=owner.user)
    key = services.api_key_authenticate(owner.key)
    orm = ApiKey.objects.select_related("project__organization").get(pk=key.pk)

    # Read with one SQL text made once, not the ORM: every field as the ORM reads it, and
    # the project and its organization attached (no further query).
    with django_assert_num_queries(0):
        pairs = [
            (key, orm),
            (key.project, orm.project),
            (key.project.organization, orm.project.organization),
        ]
    for ours, theirs in pairs:
        fields = type(ours)._meta.concrete_fields
        assert [getattr(ours, f.attname) for f in fields] == [
            getattr(theirs, f.attname) for f in fields
        ]
        assert (ours._state.adding, ours._state.db) == (False, "default")
    services.api_key_revoke(key=key, actor=owner.user)
    assert services.api_key_authenticate(owner.key) is None
