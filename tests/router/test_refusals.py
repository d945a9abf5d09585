"""Who the router serves: a run key of a running, covered run, for a covered model. Everyone
else gets an OpenAI-style error, and a known run's refused call is still traced in its run."""

import httpx
import pytest

from belvedir.models import ApiKey, Project
from belvedir.services import api_key_create
from models_registry.models import CoveredModel, Lab
from tests.router.helpers import (
    INPUT_PRICE,
    MAX_OUTPUT,
    MODEL,
    OUTPUT_PRICE,
    make_run,
    settled,
)
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}


def _post(router_url: str, key: str | None, body=BODY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{router_url}/chat/completions", json=body, headers=headers, timeout=30)


def test_an_unknown_or_missing_key_gets_401_and_nothing_is_forwarded(
    covered_run, router_url, upstream
):
    for key in (None, "bv_live_notakey", "sk-something"):
        response = _post(router_url, key)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"
    assert upstream.requests == []


def test_a_project_key_gets_403_the_router_serves_run_keys(owner, covered_model, router_url):
    _, project_key = api_key_create(project=owner.project, name="ci", kind=ApiKey.Kind.PROJECT)

    response = _post(router_url, project_key)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "run_key_required"


def test_a_run_that_is_not_covered_or_not_running_gets_403_and_the_refusal_is_traced(
    owner, harness, covered_model, router_url, upstream
):
    uncovered = make_run(owner.project, harness, cap_micros=10**6, covered=False)
    queued = make_run(owner.project, harness, cap_micros=10**6, status="queued")

    first, second = _post(router_url, uncovered.plain_key), _post(router_url, queued.plain_key)

    assert (first.status_code, first.json()["error"]["code"]) == (403, "run_not_covered")
    assert (second.status_code, second.json()["error"]["code"]) == (403, "run_not_running")
    assert upstream.requests == []
    assert Span.objects.get(run=uncovered).status_code == "error"
    assert Span.objects.get(run=queued).attributes["http.response.status_code"] == 403


def test_a_model_the_platform_does_not_cover_gets_404_naming_it(covered_run, router_url):
    response = _post(router_url, covered_run.plain_key, {**BODY, "model": "acme/secret-model"})

    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("model_not_found", "invalid_request_error")
    assert "acme/secret-model" in error["message"]
    assert Span.objects.get(run=covered_run).model == "acme/secret-model"


def test_a_body_that_is_not_a_chat_request_gets_400_traced_in_the_run(covered_run, router_url):
    for body in ({"model": MODEL}, [1, 2]):
        response = _post(router_url, covered_run.plain_key, body)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert _post(router_url, None, [1, 2]).status_code == 401  # the key is checked first

    spans = Span.objects.filter(run=covered_run)
    assert [s.attributes["http.response.status_code"] for s in spans] == [400, 400]
    assert {s.status_message for s in spans} == {"The body must be a JSON object with messages."}


def test_with_no_upstream_key_configured_the_router_answers_503(covered_run, serve_router):
    router_url = serve_router(BELVEDIR_ROUTER_UPSTREAM_KEY="")

    response = _post(router_url, covered_run.plain_key)

    assert response.status_code == 503
    assert "no model upstream" in response.json()["error"]["message"]
    settled(covered_run, spans=1)
    span = Span.objects.get(run=covered_run)
    assert span.attributes["http.response.status_code"] == 503


@pytest.mark.parametrize("status", [401, 402, 403])
def test_the_upstream_refusing_the_platforms_account_is_a_502_not_the_callers_error(
    covered_run, router_url, upstream, status
):
    text = b'{"error": {"message": "Insufficient credits: can afford 1234 tokens", "code": 402}}'
    upstream.fail = (status, text)

    response = _post(router_url, covered_run.plain_key)

    assert response.status_code == 502
    error = response.json()["error"]
    assert error == {
        "message": "The platform's model upstream refused the call.",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_refused",
    }
    span = Span.objects.get(run=covered_run)
    assert span.status_message == (
        f"The upstream answered {status}: Insufficient credits: can afford 1234 tokens"
    )
    assert settled(covered_run, spans=1).covered_spent_micros == 0


def test_the_models_list_shows_the_covered_models_to_a_run_key_only(covered_run, router_url):
    listed = httpx.get(
        f"{router_url}/models", headers={"Authorization": f"Bearer {covered_run.plain_key}"}
    )
    anonymous = httpx.get(f"{router_url}/models")

    assert listed.status_code == 200
    entry = next(m for m in listed.json()["data"] if m["id"] == MODEL)
    assert (entry["object"], entry["owned_by"]) == ("model", "Fake Lab")
    assert anonymous.status_code == 401


def test_a_chinese_lab_model_is_refused_unless_the_runs_project_allows_chinese_models(
    owner, harness, covered_run, router_url, upstream
):
    lab = Lab.objects.create(name="Fake CN Lab", slug="fakecn", vendor_prefixes="fakecn")
    lab.is_chinese = True
    lab.save()
    CoveredModel.objects.create(
        model_id="fakecn/model-1",
        display_name="A Chinese lab's model",
        lab=lab,
        input_price_micros=INPUT_PRICE,
        output_price_micros=OUTPUT_PRICE,
        max_output_tokens=MAX_OUTPUT,
    )
    allowing = Project.objects.create(
        organization=owner.org, name="Allows", chinese_models_allowed=True
    )
    refusing_run = make_run(owner.project, harness, cap_micros=2_000_000, model="fakecn/model-1")
    allowed_run = make_run(allowing, harness, cap_micros=2_000_000, model="fakecn/model-1")
    body = {**BODY, "model": "fakecn/model-1"}

    refused = _post(router_url, refusing_run.plain_key, body)
    served = _post(router_url, allowed_run.plain_key, body)

    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "model_not_allowed"
    assert "Fake CN Lab" in error["message"] and "chinese_models_allowed" in error["message"]
    assert served.status_code == 200
    assert len(upstream.requests) == 1
    assert _listed(router_url, refusing_run) == []
    assert _listed(router_url, allowed_run) == ["fakecn/model-1"]
    assert _listed(router_url, covered_run) == [MODEL]
    uncovered = make_run(owner.project, harness, cap_micros=10**6, covered=False)
    assert _listed(router_url, uncovered) == []


def _listed(router_url: str, run) -> list[str]:
    headers = {"Authorization": f"Bearer {run.plain_key}"}
    listed = httpx.get(f"{router_url}/models", headers=headers)
    return [m["id"] for m in listed.json()["data"]]
