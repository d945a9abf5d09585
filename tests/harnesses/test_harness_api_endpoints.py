"""/api/v1/harnesses[/{id}]: owner, outsider 404, read-only 403, bad input 400 naming the field."""

import pytest
from rest_framework.test import APIClient

from harnesses.models import Harness

HARNESS = {
    "name": "Smoke",
    "repo_url": "https://github.com/example/harness.git",
    "install_command": "pip install -r requirements.txt",
    "run_command": "python run.py",
    "env": {"MODEL": "openai/gpt-4.1-mini"},
}

API_FIELDS = {
    "id",
    "name",
    "repo_url",
    "ref",
    "install_command",
    "run_command",
    "env",
    "compute",
    "gpu_type",
    "tasks",
    "preset",
}


def test_api_answers_with_the_documented_json_fields(owner, harness):
    body = owner.api.get(f"/api/v1/harnesses/{harness.pk}").json()
    assert API_FIELDS <= set(body)
    assert body["env"] == {"MODEL": "openai/gpt-4.1-mini"}


def test_list_shows_the_projects_harnesses_only(owner, outsider, harness):
    outsider.api.post("/api/v1/harnesses", {**HARNESS, "name": "Theirs"}, format="json")
    names = [h["name"] for h in owner.api.get("/api/v1/harnesses").json()["results"]]
    assert names == ["Smoke"]
    names = [h["name"] for h in outsider.api.get("/api/v1/harnesses").json()["results"]]
    assert names == ["Theirs"]


def test_list_is_paginated(owner, harness):
    body = owner.api.get("/api/v1/harnesses?limit=1").json()
    assert body["count"] == 1 and len(body["results"]) == 1


def test_read_only_member_can_list_and_read(readonly, harness):
    assert readonly.api.get("/api/v1/harnesses").json()["count"] == 1
    assert readonly.api.get(f"/api/v1/harnesses/{harness.pk}").status_code == 200


def test_read_only_member_cannot_create_edit_or_delete(readonly, harness):
    assert (
        readonly.api.post(
            "/api/v1/harnesses", {**HARNESS, "name": "New"}, format="json"
        ).status_code
        == 403
    )
    assert (
        readonly.api.patch(
            f"/api/v1/harnesses/{harness.pk}", {"name": "x"}, format="json"
        ).status_code
        == 403
    )
    assert (
        readonly.api.put(f"/api/v1/harnesses/{harness.pk}", HARNESS, format="json").status_code
        == 403
    )
    assert readonly.api.delete(f"/api/v1/harnesses/{harness.pk}").status_code == 403
    harness.refresh_from_db()
    assert harness.name == "Smoke"


def test_outsider_gets_404_for_every_verb_on_another_organizations_harness(outsider, harness):
    url = f"/api/v1/harnesses/{harness.pk}"
    assert outsider.api.get(url).status_code == 404
    assert outsider.api.patch(url, {"name": "x"}, format="json").status_code == 404
    assert outsider.api.put(url, HARNESS, format="json").status_code == 404
    assert outsider.api.delete(url).status_code == 404
    assert Harness.objects.filter(pk=harness.pk, name="Smoke").exists()


def test_an_unknown_harness_id_is_404(owner):
    assert owner.api.get("/api/v1/harnesses/har_doesnotexist").status_code == 404


def test_anonymous_callers_get_401(db, harness):
    assert APIClient().get("/api/v1/harnesses").status_code == 401
    assert APIClient().get(f"/api/v1/harnesses/{harness.pk}").status_code == 401


def test_owner_edits_a_harness_and_untouched_fields_keep_their_value(owner, harness):
    response = owner.api.patch(
        f"/api/v1/harnesses/{harness.pk}", {"name": "Renamed", "ref": "v2"}, format="json"
    )
    assert response.status_code == 200, response.json()
    harness.refresh_from_db()
    assert (harness.name, harness.ref, harness.run_command) == ("Renamed", "v2", "python run.py")


def test_owner_deletes_a_harness(owner, harness):
    assert owner.api.delete(f"/api/v1/harnesses/{harness.pk}").status_code == 204
    assert not Harness.objects.filter(pk=harness.pk).exists()


def test_gpu_harness_defaults_to_an_a10g(owner):
    body = owner.api.post("/api/v1/harnesses", {**HARNESS, "compute": "gpu"}, format="json").json()
    assert (body["compute"], body["gpu_type"]) == ("gpu", "A10G")


def test_cpu_harness_drops_a_gpu_type(owner):
    body = owner.api.post(
        "/api/v1/harnesses", {**HARNESS, "compute": "cpu", "gpu_type": "H100"}, format="json"
    ).json()
    assert body["gpu_type"] == ""


@pytest.mark.parametrize(
    "change,field",
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 121}, "name"),
        ({"name": None}, "name"),
        ({"repo_url": "http://example.com/h.git"}, "repo_url"),
        ({"repo_url": None}, "repo_url"),
        ({"ref": "--upload-pack=evil"}, "ref"),
        ({"ref": "v" * 201}, "ref"),
        ({"repo_url": "https://github.com/example/" + "h" * 500}, "repo_url"),
        ({"run_command": ""}, "run_command"),
        ({"install_command": "x" * 10_001}, "install_command"),
        ({"env": {"PATH": "/x"}}, "env"),
        ({"env": ["MODEL=x"]}, "env"),
        ({"compute": "tpu"}, "compute"),
        ({"compute": "gpu", "gpu_type": "RTX9090"}, "gpu_type"),
        ({"tasks": "a" * (512 * 1024 + 1)}, "tasks"),
        ({"tasks": ["not", "text"]}, "tasks"),
        ({"preset": "mastra"}, "preset"),
    ],
)
def test_bad_input_is_400_naming_the_field(owner, change, field):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, **change}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not Harness.objects.exists()


@pytest.mark.parametrize(
    "change,field",
    [
        ({"name": ""}, "name"),
        ({"repo_url": "ftp://x/y"}, "repo_url"),
        ({"env": {"HOME": "/"}}, "env"),
        ({"compute": "tpu"}, "compute"),
    ],
)
def test_bad_edits_are_400_naming_the_field_and_change_nothing(owner, harness, change, field):
    response = owner.api.patch(f"/api/v1/harnesses/{harness.pk}", change, format="json")
    assert response.status_code == 400
    assert field in response.json()
    harness.refresh_from_db()
    assert harness.name == "Smoke" and harness.env == {"MODEL": "openai/gpt-4.1-mini"}


def test_a_second_harness_with_the_same_name_is_refused_naming_name(owner, harness):
    response = owner.api.post("/api/v1/harnesses", HARNESS, format="json")
    assert response.status_code == 400
    assert "Smoke" in response.json()["name"][0]


def test_renaming_onto_another_harness_is_refused_naming_name(owner, harness):
    other = owner.api.post("/api/v1/harnesses", {**HARNESS, "name": "Other"}, format="json").json()
    response = owner.api.patch(f"/api/v1/harnesses/{other['id']}", {"name": "Smoke"}, format="json")
    assert response.status_code == 400 and "name" in response.json()


def test_malformed_json_is_400_not_500(owner):
    response = owner.api.generic(
        "POST", "/api/v1/harnesses", "{not json", content_type="application/json"
    )
    assert response.status_code == 400
