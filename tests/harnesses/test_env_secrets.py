"""Secret harness env values: encrypted at rest, write-only (masked) in the API, pages and admin."""

import pytest
from django.apps import apps
from django.contrib.admin.utils import quote
from django.db import connection

from belvedir import crypto
from harnesses import env_secrets
from harnesses.env_secrets import MASK
from harnesses.models import Harness

SECRET = "sk-live-very-secret-harness-value-1234"
HARNESS = {"name": "Secretive", "repo_url": "https://github.com/example/h.git", "run_command": "x"}


def _row_text(harness_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT h::text FROM harnesses_harness h WHERE id = %s", [harness_id])
        return cursor.fetchone()[0]


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET",
        "DB_PASSWORD",
        "PASSWORD",
        "MODAL_TOKEN_SECRET",
        "BELVEDIR_AGENT_TOKEN",
        "OPENROUTER_API_KEY",
        "HF_TOKEN",
        "openai_api_key",
    ],
)
def test_names_that_mark_secrets_are_recognised(name):
    assert env_secrets.is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["MODEL", "TOKENIZER", "KEYWORDS", "HARNESS_OWN", "MODEL_API_BASE"]
)
def test_ordinary_names_are_not_secrets(name):
    assert not env_secrets.is_secret_name(name)


def test_a_secret_env_value_is_stored_encrypted_and_answered_masked(owner):
    env = {"OPENAI_API_KEY": SECRET, "MODEL": "acme/m"}
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "env": env}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["env"] == {"MODEL": "acme/m", "OPENAI_API_KEY": MASK}
    harness = Harness.objects.get(pk=response.json()["id"])
    assert SECRET not in _row_text(harness.pk), "a secret env value is stored in plaintext"
    assert env_secrets.env_plain(harness.env, harness.env_secrets_encrypted) == env
    for response in [
        owner.api.get(f"/api/v1/harnesses/{harness.pk}"),
        owner.api.get("/api/v1/harnesses"),
        owner.web.get(f"/harnesses/{harness.pk}/"),
    ]:
        assert response.status_code == 200
        assert SECRET not in response.content.decode()
    assert "OPENAI_API_KEY=••••" in owner.web.get(f"/harnesses/{harness.pk}/").content.decode()


def test_sending_the_mask_back_keeps_the_secret_and_a_new_value_replaces_it(owner):
    created = owner.api.post(
        "/api/v1/harnesses", {**HARNESS, "env": {"HF_TOKEN": SECRET}}, format="json"
    ).json()
    url = f"/api/v1/harnesses/{created['id']}"
    kept = owner.api.patch(url, {"env": {"HF_TOKEN": MASK, "MODEL": "m"}}, format="json")
    assert kept.status_code == 200 and kept.json()["env"]["HF_TOKEN"] == MASK
    harness = Harness.objects.get(pk=created["id"])
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {"HF_TOKEN": SECRET}
    # A patch without env keeps every secret too.
    owner.api.patch(url, {"name": "Renamed"}, format="json")
    harness.refresh_from_db()
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {"HF_TOKEN": SECRET}
    owner.api.patch(url, {"env": {"HF_TOKEN": "hf_new_value_0000"}}, format="json")
    harness.refresh_from_db()
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {
        "HF_TOKEN": "hf_new_value_0000"
    }


def test_the_mask_for_a_secret_never_saved_is_refused_naming_the_field(owner):
    response = owner.api.post(
        "/api/v1/harnesses", {**HARNESS, "env": {"HF_TOKEN": MASK}}, format="json"
    )
    assert response.status_code == 400
    assert "HF_TOKEN" in response.json()["env"][0]


def test_the_harness_page_keeps_a_masked_secret_on_save(owner):
    created = owner.api.post(
        "/api/v1/harnesses", {**HARNESS, "env": {"DB_PASSWORD": SECRET}}, format="json"
    ).json()
    form = {**HARNESS, "compute": "cpu", "env": "DB_PASSWORD=••••\nMODEL=x"}
    response = owner.web.post(f"/harnesses/{created['id']}/", form)
    assert response.status_code == 303
    harness = Harness.objects.get(pk=created["id"])
    assert harness.env == {"MODEL": "x"}
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {"DB_PASSWORD": SECRET}


def test_the_admin_shows_secrets_masked_and_keeps_them_on_save(owner, superuser):
    created = owner.api.post(
        "/api/v1/harnesses", {**HARNESS, "env": {"GITHUB_TOKEN": SECRET}}, format="json"
    ).json()
    page = superuser.get(f"/admin/harnesses/harness/{quote(created['id'])}/change/")
    assert page.status_code == 200
    assert SECRET not in page.content.decode()
    harness = Harness.objects.get(pk=created["id"])
    form = page.context["adminform"].form
    data = {name: form[name].value() or "" for name in form.fields}
    data["env"] = form["env"].value()
    data["project"] = harness.project_id
    response = superuser.post(f"/admin/harnesses/harness/{quote(harness.pk)}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    harness.refresh_from_db()
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {"GITHUB_TOKEN": SECRET}


def test_existing_plaintext_secret_env_is_encrypted_by_the_data_migration(owner, harness):
    Harness.objects.filter(pk=harness.pk).update(env={"MY_API_KEY": SECRET, "MODEL": "m"})
    migration = __import__("harnesses.migrations.0002_env_secrets", fromlist=["x"])
    migration.encrypt_secret_env(apps, None)
    harness.refresh_from_db()
    assert harness.env == {"MODEL": "m"}
    assert SECRET not in _row_text(harness.pk)
    assert env_secrets.secrets_decrypt(harness.env_secrets_encrypted) == {"MY_API_KEY": SECRET}
    assert crypto.decrypt(harness.env_secrets_encrypted)  # under the current key
