"""Generated environments: a description → a scripted test model (a local OpenAI-compatible
server answering with a tasks JSON) → a preview → saved as an environment and a harness."""

import json

import pytest

from belvedir import crypto
from billing.pricing import Price, cost_micros, worst_case_micros
from harnesses import generation
from harnesses.models import EnvironmentGeneration
from models_registry.models import CoveredModel, Lab
from tests.helpers.scripted_model import ScriptedModel
from tests.router.fake_upstream import PROMPT_TOKENS

TASKS = [
    {"id": "refund-40-days", "prompt": "A refund after 40 days?", "answer": "Store credit."},
    {
        "id": "damaged-item",
        "prompt": "The item arrived broken.",
        "answer": "Replace it at no cost.",
        "verifier": {"kind": "rubric", "criteria": ["Apologizes", "Offers a replacement"]},
        "difficulty": "easy",
    },
]
KEY = "sk-user-secret-123"


def start(tenant, server, **fields):
    body = {
        "description": "Customer-support refund questions",
        "name": "Refunds",
        "count": 2,
        "model": "acme/writer-1",
        "model_api_base": server.base_url,
        "model_api_key": KEY,
        **fields,
    }
    return tenant.api.post("/api/v1/environments/generate", body, format="json")


def run_job(generation_id: str) -> dict:
    generation.generation_execute(generation_id=generation_id)
    return EnvironmentGeneration.objects.get(pk=generation_id)


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_generated_environment_from_a_scripted_test_model(owner):
    with ScriptedModel(["Here you are:\n```json\n" + json.dumps(TASKS) + "\n```"]) as model:
        started = start(owner, model, preset="harbor-runner")
        assert started.status_code == 202, started.json()
        body = started.json()
        assert body["status"] == "queued" and body["covered"] is False
        assert KEY not in started.content.decode()
        run_job(body["id"])
    request = model.requests[0]
    assert request["model"] == "acme/writer-1"
    assert "Customer-support refund questions" in request["messages"][-1]["content"]
    assert "Write 2 tasks" in request["messages"][-1]["content"]
    preview = owner.api.get(f"/api/v1/environments/generations/{body['id']}").json()
    assert preview["status"] == "succeeded" and preview["progress"] == "2 tasks ready to review."
    assert [t["id"] for t in preview["tasks"]] == ["refund-40-days", "damaged-item"]
    assert preview["tasks"][1]["metadata"] == {"difficulty": "easy"}  # extra keys folded in
    saved = owner.api.post(f"/api/v1/environments/generations/{body['id']}/save", {}, format="json")
    assert saved.status_code == 201, saved.json()
    environment, harness = saved.json()["environment"], saved.json()["harness"]
    assert environment["name"] == "Refunds" and environment["version"] == 1
    assert environment["tasks"] == preview["tasks"]
    assert harness["preset"] == "harbor-runner"
    assert json.loads(harness["tasks"]) == preview["tasks"]
    again = owner.api.post(f"/api/v1/environments/generations/{body['id']}/save", {}, format="json")
    assert again.status_code == 400 and "already saved" in again.json()["generation"][0]


def test_the_preview_can_be_edited_before_it_is_saved(owner):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        gen_id = start(owner, model).json()["id"]
        run_job(gen_id)
    edited = [TASKS[0]]
    saved = owner.api.post(
        f"/api/v1/environments/generations/{gen_id}/save",
        {"name": "Edited", "tasks": edited},
        format="json",
    ).json()
    assert saved["environment"]["task_count"] == 1 and saved["harness"] is None
    bad = [{"id": "x", "prompt": "p", "verifier": {"kind": "wat"}}]
    with ScriptedModel([json.dumps(TASKS)]) as model:
        other = start(owner, model, name="Other").json()["id"]
        run_job(other)
    refused = owner.api.post(
        f"/api/v1/environments/generations/{other}/save", {"tasks": bad}, format="json"
    )
    assert refused.status_code == 400 and "tasks[0].verifier.kind" in refused.json()


def test_an_invalid_first_answer_is_sent_back_with_its_errors(owner):
    broken = json.dumps([{"id": "a", "prompt": "p", "verifier": {"kind": "vibes"}}])
    with ScriptedModel([broken, json.dumps(TASKS)]) as model:
        row = run_job(start(owner, model).json()["id"])
    assert row.status == "succeeded" and len(row.tasks) == 2
    retry = model.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": broken}
    assert "tasks[0] (id 'a'): verifier.kind 'vibes'" in retry[-1]["content"]


def test_a_model_that_never_answers_valid_tasks_fails_the_generation_naming_the_field(owner):
    with ScriptedModel(["I cannot do that."]) as model:
        gen_id = start(owner, model).json()["id"]
        row = run_job(gen_id)
    assert row.status == "failed" and row.finished_at is not None
    assert row.error == "The model's tasks were not valid: The answer holds no JSON list of tasks."
    saved = owner.api.post(f"/api/v1/environments/generations/{gen_id}/save", {}, format="json")
    assert saved.status_code == 400 and "failed" in saved.json()["generation"][0]


def test_a_model_error_fails_the_generation_with_a_clear_note(owner):
    with ScriptedModel(["[]"]) as model:
        model.fail = (401, b'{"error": {"message": "bad key"}}')
        row = run_job(start(owner, model).json()["id"])
    assert row.status == "failed"
    assert row.error.endswith("answered 401: bad key") and KEY not in row.error


def test_the_job_is_safe_to_run_twice(owner):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        gen_id = start(owner, model).json()["id"]
        assert generation.generation_execute(generation_id=gen_id) == "succeeded"
        assert generation.generation_execute(generation_id=gen_id) == "not queued"
    assert len(model.requests) == 1


def test_the_users_key_is_stored_encrypted_and_never_shown(owner):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        gen_id = start(owner, model).json()["id"]
    row = EnvironmentGeneration.objects.get(pk=gen_id)
    assert KEY not in row.api_key_encrypted and crypto.decrypt(row.api_key_encrypted) == KEY
    shown = owner.api.get(f"/api/v1/environments/generations/{gen_id}").content.decode()
    assert KEY not in shown


@pytest.fixture
def covered(settings, db):
    lab = Lab.objects.create(name="Writer Lab", slug="writerlab", vendor_prefixes="writerlab")
    CoveredModel.objects.create(
        model_id="writerlab/w-1",
        display_name="W-1",
        lab=lab,
        input_price_micros=1,
        output_price_micros=1,
    )
    with ScriptedModel([json.dumps(TASKS)]) as upstream:
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE = upstream.base_url
        settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-operator"
        yield upstream


def test_a_covered_model_generates_through_the_operators_upstream(owner, covered):
    started = owner.api.post(
        "/api/v1/environments/generate",
        {"description": "Refunds", "model": "writerlab/w-1", "count": 2},
        format="json",
    )
    assert started.status_code == 202, started.json()
    assert started.json()["covered"] is True
    row = run_job(started.json()["id"])
    assert row.status == "succeeded" and covered.requests[0]["model"] == "writerlab/w-1"


def _covered_generation(owner) -> str:
    started = owner.api.post(
        "/api/v1/environments/generate",
        {"description": "Refunds", "model": "writerlab/w-1", "count": 2},
        format="json",
    )
    assert started.status_code == 202, started.json()
    return started.json()["id"]


def test_a_covered_generation_is_metered_against_its_own_cap(owner, covered, settings):
    row = run_job(_covered_generation(owner))

    assert row.status == "succeeded"
    assert row.covered_cap_micros == settings.BELVEDIR_COVERED_SPEND_CAP_MICROS
    price = Price(1, 1, 8192)
    reported = cost_micros(price, input_tokens=PROMPT_TOKENS, output_tokens=5)
    assert (row.covered_spent_micros, row.covered_reserved_micros) == (reported, 0)
    assert row.covered_excess_micros == 0
    # The output limit it reserved for is the one sent: the model's, under the setting's.
    assert covered.requests[0]["max_tokens"] == 8192


def test_a_covered_generation_past_its_cap_never_calls_the_upstream(owner, covered, settings):
    settings.BELVEDIR_COVERED_SPEND_CAP_MICROS = 0

    row = run_job(_covered_generation(owner))

    assert row.status == "failed" and "covered spend cap of $0.00 is reached" in row.error
    assert covered.requests == []
    assert (row.covered_spent_micros, row.covered_reserved_micros) == (0, 0)


def test_a_covered_generation_is_charged_at_most_its_reservation_whatever_the_upstream_reports(
    owner, covered
):
    covered.usage_of = lambda body: {"prompt_tokens": 10**9, "completion_tokens": 10**9}

    row = run_job(_covered_generation(owner))

    assert row.status == "succeeded"
    reserved = worst_case_micros(Price(1, 1, 8192), covered.requests[0])
    assert (row.covered_spent_micros, row.covered_reserved_micros) == (reserved, 0)
    assert row.covered_excess_micros == 2_000 - reserved and row.covered_excess_calls == 1


def test_a_chinese_labs_covered_model_needs_the_projects_permission(owner, covered):
    Lab.objects.filter(slug="writerlab").update(is_chinese=True)
    body = {"description": "Refunds", "model": "writerlab/w-1"}
    refused = owner.api.post("/api/v1/environments/generate", body, format="json")
    assert refused.status_code == 400 and "Chinese lab" in refused.json()["model"][0]
    owner.project.chinese_models_allowed = True
    owner.project.save()
    assert owner.api.post("/api/v1/environments/generate", body, format="json").status_code == 202


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"model": "acme/uncovered", "model_api_key": "", "model_api_base": ""}, "model_api_key"),
        ({"description": " "}, "description"),
        ({"count": 0}, "count"),
        ({"count": 51}, "count"),
        ({"model": "has space"}, "model"),
        ({"preset": "mastra"}, "preset"),
        ({"preset": "gaia"}, "preset"),
        ({"model_api_base": "ftp://x"}, "model_api_base"),
    ],
)
def test_bad_generation_requests_are_refused_naming_the_field(owner, fields, field):
    with ScriptedModel(["[]"]) as model:
        response = start(owner, model, **fields)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not EnvironmentGeneration.objects.exists()


def test_outsiders_and_read_only_members(owner, outsider, readonly):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        gen_id = start(owner, model).json()["id"]
        run_job(gen_id)
        assert start(readonly, model).status_code == 403
    assert outsider.api.get(f"/api/v1/environments/generations/{gen_id}").status_code == 404
    assert readonly.api.get(f"/api/v1/environments/generations/{gen_id}").status_code == 200
    save = f"/api/v1/environments/generations/{gen_id}/save"
    assert readonly.api.post(save, {}, format="json").status_code == 403
    assert outsider.api.post(save, {}, format="json").status_code == 404


def test_a_job_that_stopped_midway_is_failed_when_read(owner, settings):
    from datetime import timedelta

    from django.utils import timezone

    with ScriptedModel([json.dumps(TASKS)]) as model:
        gen_id = start(owner, model).json()["id"]
    long_ago = timezone.now() - timedelta(seconds=settings.BELVEDIR_GENERATION_TIMEOUT + 120)
    EnvironmentGeneration.objects.filter(pk=gen_id).update(
        status="running", started_at=long_ago, created_at=long_ago
    )
    body = owner.api.get(f"/api/v1/environments/generations/{gen_id}").json()
    assert body["status"] == "failed" and "stopped before it finished" in body["error"]
    assert generation.generation_execute(generation_id=gen_id) == "not queued"


def test_a_generation_long_queued_says_what_it_waits_for(owner):
    from datetime import timedelta

    from django.utils import timezone

    with ScriptedModel([json.dumps(TASKS)]) as model:
        gen_id = start(owner, model).json()["id"]
    EnvironmentGeneration.objects.filter(pk=gen_id).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )
    page = owner.web.get(f"/environments/generations/{gen_id}/").content.decode()
    assert "waiting for a worker of the housekeeping cluster" in page
    assert EnvironmentGeneration.objects.get(pk=gen_id).status == "queued"


@pytest.mark.parametrize(
    "base",
    [
        "http://127.0.0.1:9/v1",
        "http://10.0.0.7/v1",
        "http://169.254.169.254/latest",
        "http://[::1]/v1",
    ],
)
def test_a_model_base_on_an_internal_address_is_refused_naming_it(owner, settings, base):
    """Generation posts to the base its user names from inside the platform's network: the
    model-host policy the router applies (belvedir/net_policy.py) applies here too."""
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_MODEL_HOST_ALLOWLIST = []
    with ScriptedModel(["[]"]) as model:
        response = start(owner, model, model_api_base=base)
        assert model.requests == []
    assert response.status_code == 400
    assert "model_api_base" in response.json(), response.json()
    assert not EnvironmentGeneration.objects.exists()


def test_a_model_base_that_turned_internal_after_the_request_is_refused_at_the_call(
    owner, settings, monkeypatch
):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        generation_id = start(owner, model).json()["id"]  # BELVEDIR_DEV=1: allowed
        settings.BELVEDIR_DEV = False  # as if its name now resolved to 127.0.0.1
        settings.BELVEDIR_MODEL_HOST_ALLOWLIST = []
        done = run_job(generation_id)
        assert model.requests == []
    assert done.status == "failed"
    assert "is refused" in done.error and "loopback address" in done.error, done.error
