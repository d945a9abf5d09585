"""What the router forwards: only the chat-completions fields whose cost its reservation bounds,
for the run's own models. Fields that would pick another model or add billed work upstream are
refused naming them, anything else unknown is dropped, and a covered run's key calls only the
model and the judge the run was launched with."""

import httpx
import pytest

from billing.pricing import Price, worst_case_micros
from models_registry.models import CoveredModel
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, make_run, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)


def _post(router_url: str, run, body) -> httpx.Response:
    headers = {"Authorization": f"Bearer {run.plain_key}"}
    return httpx.post(f"{router_url}/chat/completions", json=body, headers=headers, timeout=30)


def _another_model(covered_model, model_id: str) -> CoveredModel:
    return CoveredModel.objects.create(
        model_id=model_id,
        display_name=model_id,
        lab=covered_model.lab,
        input_price_micros=INPUT_PRICE * 50,
        output_price_micros=OUTPUT_PRICE * 50,
        max_output_tokens=MAX_OUTPUT,
    )


ROUTING = {
    "models": ["fakelab/expensive-model"],
    "route": "fallback",
    "provider": {"order": ["somewhere"], "allow_fallbacks": True},
    "plugins": [{"id": "web", "max_results": 20}],
    "transforms": ["middle-out"],
}


@pytest.mark.parametrize("field", sorted(ROUTING))
def test_a_routing_or_billing_field_is_refused_with_a_400_naming_it_and_nothing_is_forwarded(
    covered_run, router_url, upstream, field
):
    answer = _post(router_url, covered_run, {**BODY, field: ROUTING[field]})

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (field, "unsupported_field")
    assert repr(field) in error["message"]
    assert upstream.requests == []
    run = settled(covered_run, spans=1)
    assert Span.objects.get(run=run).attributes["http.response.status_code"] == 400


def test_unknown_fields_are_dropped_and_the_known_ones_forwarded(covered_run, router_url, upstream):
    known = {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "user": "agent-1",
        "stop": ["\n\n"],
        "presence_penalty": 0.1,
        "response_format": {"type": "json_object"},
    }
    unknown = {"x_vendor_extension": {"spend": "more"}, "top_k": 40, "usage": {"include": True}}

    answer = _post(router_url, covered_run, {**BODY, **known, **unknown})

    assert answer.status_code == 200, answer.text
    (forwarded,) = upstream.requests
    assert {name: forwarded[name] for name in known} == known
    assert not set(unknown) & set(forwarded)
    settled(covered_run, spans=1)


def test_a_response_format_schema_counts_in_the_reserved_worst_case(
    owner, harness, covered_model, router_url, upstream
):
    """The upstream reads a structured output's schema as prompt: a call whose bulk is its schema
    must reserve for it, or a run could spend past its cap."""
    schema = {"type": "object", "description": "x" * 30_000}
    body = {**BODY, "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    without = worst_case_micros(PRICE, BODY)
    run = make_run(owner.project, harness, cap_micros=without * 3)

    answer = _post(router_url, run, body)

    assert worst_case_micros(PRICE, body) > without + 10_000 * INPUT_PRICE // 10**6
    assert answer.status_code == 402, answer.text
    assert answer.json()["error"]["code"] == "spend_cap_reached"
    assert upstream.requests == []


def test_a_covered_run_may_call_only_its_own_model_and_judge(
    owner, harness, covered_model, router_url, upstream
):
    _another_model(covered_model, "fakelab/judge")
    _another_model(covered_model, "fakelab/expensive-model")
    run = make_run(
        owner.project, harness, cap_micros=10**9, judge_model="fakelab/judge", judge_covered=True
    )

    own = _post(router_url, run, BODY)
    judge = _post(router_url, run, {**BODY, "model": "fakelab/judge"})
    other = _post(router_url, run, {**BODY, "model": "fakelab/expensive-model"})

    assert (own.status_code, judge.status_code) == (200, 200)
    assert other.status_code == 403
    error = other.json()["error"]
    assert error["code"] == "model_not_for_run"
    assert "fakelab/expensive-model" in error["message"]
    assert [request["model"] for request in upstream.requests] == [MODEL, "fakelab/judge"]
    listed = httpx.get(
        f"{router_url}/models", headers={"Authorization": f"Bearer {run.plain_key}"}
    ).json()
    assert sorted(entry["id"] for entry in listed["data"]) == [MODEL, "fakelab/judge"]
    settled(run, spans=3)


def test_a_judge_named_in_the_harness_env_is_the_runs_and_an_uncovered_model_is_not(
    owner, harness, covered_model, router_url, upstream
):
    """A judge given by the harness's JUDGE_MODEL (not at launch) is what the sandbox calls;
    a model paid for with the user's own key is not the platform's to pay for."""
    _another_model(covered_model, "fakelab/judge")
    run = make_run(
        owner.project,
        harness,
        cap_micros=10**9,
        model_covered=False,
        judge_covered=True,
        harness_snapshot={"env": {"JUDGE_MODEL": "fakelab/judge"}},
    )

    judge = _post(router_url, run, {**BODY, "model": "fakelab/judge"})
    own = _post(router_url, run, BODY)

    assert judge.status_code == 200, judge.text
    assert own.status_code == 403
    assert own.json()["error"]["code"] == "model_not_for_run"
    settled(run, spans=2)


def test_a_body_nested_too_deep_for_python_is_a_400_not_a_500(covered_run, router_url, upstream):
    deep = "[" * 30_000 + "]" * 30_000
    body = f'{{"model": "{MODEL}", "messages": {deep}}}'
    headers = {"Authorization": f"Bearer {covered_run.plain_key}"}

    answer = httpx.post(f"{router_url}/chat/completions", content=body, headers=headers, timeout=30)

    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert upstream.requests == []
    settled(covered_run, spans=1)
