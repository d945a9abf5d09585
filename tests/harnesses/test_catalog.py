"""The catalog: every preset from the docs, grouped, prefilling every field; unavailable refused."""

import json

import pytest

from belvedir.errors import Invalid
from harnesses import services
from harnesses.catalog import PRESETS, preset_get
from harnesses.catalog import SUITES as SUITES_GROUP

SUITES = ["SWE-bench Verified", "Terminal-Bench 2.1", "τ³-bench", "GAIA", "Aider Polyglot"]
AVAILABLE = {
    "Suites": SUITES,
    "Belvedir Runners": ["Belvedir Runner", "Belvedir Runner on Harbor"],
    "Agent scaffolds": ["OpenClaw", "OpenCode", "Pi"],
}
NOT_YET_AVAILABLE = {
    "lm-eval": "GPU-served",
    "mt-bench": "GPU-served",
    "hermes-agent": "Agent scaffolds",
    "prime-agent": "Agent scaffolds",
    "qm": "Agent scaffolds",
    "mastra": "Agent scaffolds",
}
UNAVAILABLE_NAMES = {
    "lm-eval": "lm-eval",
    "mt-bench": "MT-Bench",
    "hermes-agent": "Hermes Agent",
    "prime-agent": "Prime Agent",
    "qm": "QM",
    "mastra": "Mastra",
}


def _catalog(client) -> dict:
    response = client.get("/api/v1/catalog")
    assert response.status_code == 200
    return {g["group"]: g["presets"] for g in response.json()["groups"]}


def test_catalog_lists_every_available_preset_from_the_docs_in_its_group(owner):
    groups = _catalog(owner.api)
    for group, names in AVAILABLE.items():
        available = [p["name"] for p in groups[group] if p["available"]]
        assert available == names, group


def test_catalog_groups_come_in_the_order_of_the_docs(owner):
    assert list(_catalog(owner.api)) == [
        "Suites",
        "Belvedir Runners",
        "Agent scaffolds",
        "GPU-served",
    ]


@pytest.mark.parametrize("slug,group", NOT_YET_AVAILABLE.items())
def test_not_yet_available_cards_are_listed_and_marked_unavailable(owner, slug, group):
    presets = {p["slug"]: p for p in _catalog(owner.api)[group]}
    assert presets[slug]["available"] is False
    assert UNAVAILABLE_NAMES[slug] in presets[slug]["name"]


def test_the_gpu_served_presets_are_gpu_presets(owner):
    for preset in _catalog(owner.api)["GPU-served"]:
        assert preset["compute"] == "gpu" and preset["gpu_type"] == "A10G"


@pytest.mark.parametrize("name", SUITES)
def test_suites_default_to_terminus_2_and_five_tasks(owner, name):
    suite = next(p for p in _catalog(owner.api)["Suites"] if p["name"] == name)
    assert suite["env"]["HARBOR_AGENT"] == "terminus-2"
    assert suite["env"]["HARBOR_N_TASKS"] == "5"


def test_only_the_suites_prefill_a_task_cap():
    """HARBOR_N_TASKS is the suites' (5, as documented); Runner on Harbor and the scaffolds run
    every task of their list, and so does a harness made from an environment."""
    capped = {p.slug for p in PRESETS if "HARBOR_N_TASKS" in p.env}
    assert capped == {p.slug for p in PRESETS if p.group == SUITES_GROUP}
    assert {p.env["HARBOR_N_TASKS"] for p in PRESETS if p.slug in capped} == {"5"}


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_harness_made_from_an_environment_runs_all_its_tasks(owner):
    from harnesses.environments import environment_create, environment_harness_create

    tasks = [{"id": f"t{n}", "prompt": f"Question {n}?"} for n in range(20)]
    environment = environment_create(
        project=owner.project, created_by=owner.user, name="Twenty", tasks=tasks
    )
    harness = environment_harness_create(environment=environment, preset="harbor-runner")
    assert "HARBOR_N_TASKS" not in harness.env
    # Its Tasks field is what runs (exported as a Harbor dataset at launch), all 20.
    assert "HARBOR_DATASET" not in harness.env and len(json.loads(harness.tasks)) == 20


def test_belvedir_runner_on_harbor_has_the_slug_harbor_runner():
    preset = preset_get("harbor-runner")
    assert preset is not None and preset.name == "Belvedir Runner on Harbor"


def test_runners_and_scaffolds_come_with_an_example_task_list():
    for slug in ["runner", "harbor-runner", "openclaw", "opencode", "pi"]:
        assert preset_get(slug).tasks.strip().startswith("[")


@pytest.mark.usefixtures("owner_pays_as_you_go")
@pytest.mark.parametrize("preset", [p for p in PRESETS if p.available], ids=lambda p: p.slug)
def test_every_available_card_creates_a_valid_harness_with_every_field_prefilled(owner, preset):
    response = owner.api.post("/api/v1/harnesses", {"preset": preset.slug}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    for field in [
        "name",
        "repo_url",
        "ref",
        "install_command",
        "run_command",
        "compute",
        "gpu_type",
        "tasks",
    ]:
        assert body[field] == getattr(preset, field), field
    assert body["env"] == preset.prefilled_env()
    assert body["preset"] == preset.slug


def test_every_card_field_is_editable_before_create(owner):
    """With the user's own Modal account (both tokens); the managed workspace keeps the
    Harbor driver as shipped (tests/harnesses/test_managed_rules.py)."""
    modal = {"MODAL_TOKEN_ID": "ak-1", "MODAL_TOKEN_SECRET": "as-1"}
    body = {
        "preset": "openclaw",
        "name": "Mine",
        "ref": "v2",
        "install_command": "make",
        "run_command": "make run",
        "env": {"HARBOR_AGENT": "openclaw", "HARBOR_N_TASKS": "2", **modal},
        "tasks": '[{"id": "mine", "prompt": "Hi"}]',
        "compute": "gpu",
        "gpu_type": "L4",
        "repo_url": "git@example.com:me/h.git",
    }
    response = owner.api.post("/api/v1/harnesses", body, format="json")
    assert response.status_code == 201, response.json()
    body["env"]["MODAL_TOKEN_SECRET"] = "••••"  # a secret: shown masked
    assert {k: response.json()[k] for k in body} == body


def test_a_field_given_blank_stays_blank_instead_of_taking_the_cards_value(owner):
    response = owner.api.post(
        "/api/v1/harnesses",
        {"preset": "runner", "tasks": "", "install_command": ""},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["tasks"] == "" and response.json()["install_command"] == ""


@pytest.mark.parametrize("slug,name", UNAVAILABLE_NAMES.items())
def test_creating_from_a_not_yet_available_card_is_refused_naming_the_card(owner, slug, name):
    response = owner.api.post("/api/v1/harnesses", {"preset": slug}, format="json")
    assert response.status_code == 400
    message = response.json()["preset"][0]
    assert name in message and "not yet available" in message


def test_an_unknown_card_is_refused_naming_it(owner):
    response = owner.api.post("/api/v1/harnesses", {"preset": "nope"}, format="json")
    assert response.status_code == 400
    assert "nope" in response.json()["preset"][0]


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_harness_cannot_be_moved_onto_an_unavailable_card(owner):
    harness_id = owner.api.post("/api/v1/harnesses", {"preset": "pi"}, format="json").json()["id"]
    response = owner.api.patch(f"/api/v1/harnesses/{harness_id}", {"preset": "qm"}, format="json")
    assert response.status_code == 400
    assert "QM" in response.json()["preset"][0]


def test_defaults_from_an_unavailable_card_are_refused():
    with pytest.raises(Invalid) as error:
        services.harness_defaults_from_preset("hermes-agent")
    assert "Hermes Agent" in error.value.message


def test_catalog_needs_a_signed_in_caller(db):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/catalog").status_code == 401


def test_catalog_is_readable_by_read_only_members(readonly):
    assert readonly.api.get("/api/v1/catalog").status_code == 200


def test_catalog_is_read_only(owner):
    assert owner.api.post("/api/v1/catalog", {}, format="json").status_code == 405
