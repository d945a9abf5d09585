"""Own-key calls through the router (the model proxy): a run launched with the user's own key
calls the router with its run key; the router forwards to the user's base with the user's
key, the harness's fields as sent, charges the organization nothing, and records one span
with the tokens and the catalog's estimate, "billed to your provider". The user's key
reaches the upstream and nothing else: not the answer, not an error, not a span. Served by
uvicorn on 127.0.0.1; the user's base is a local fake upstream."""

import json

import httpx
import pytest
from django.conf import settings as django_settings

from belvedir import crypto
from tests.router.fake_upstream import PROMPT_TOKENS, FakeUpstream
from tests.router.helpers import INPUT_PRICE, MODEL, OUTPUT_PRICE, make_run
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-user-own-key-0123456789abcdef"
QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture
def user_base():
    """The user's own provider (a local fake)."""
    with FakeUpstream() as fake:
        yield fake


def _own_key_run(owner, harness, base: str, **fields):
    return make_run(
        owner.project,
        harness,
        cap_micros=0,
        covered=False,
        model_proxied=True,
        model_api_base_resolved=base,
        model_api_key_encrypted=crypto.encrypt(KEY),
        **fields,
    )


def _post(router_url, run, body, **headers):
    headers = {"Authorization": f"Bearer {run.plain_key}", **headers}
    return httpx.post(f"{router_url}/chat/completions", json=body, headers=headers, timeout=30)


def _spans(run, count: int) -> list[Span]:
    import time

    deadline = time.monotonic() + 15
    while Span.objects.filter(run=run).count() < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return list(Span.objects.filter(run=run).order_by("start_time"))


def test_an_own_key_call_reaches_the_users_base_with_the_users_key_and_bills_the_provider(
    owner, harness, covered_model, user_base, upstream, router_url
):
    run = _own_key_run(owner, harness, user_base.base_url)
    # A field the covered path refuses (it would change what the platform is billed) is the
    # user's own business here.
    whole = _post(router_url, run, {"model": MODEL, "messages": QUESTION, "provider": {"x": 1}})
    with httpx.stream(
        "POST",
        f"{router_url}/chat/completions",
        json={"model": MODEL, "messages": QUESTION, "stream": True},
        headers={"Authorization": f"Bearer {run.plain_key}"},
        timeout=30,
    ) as streamed:
        events = streamed.read().decode()

    assert whole.status_code == 200, whole.text
    assert whole.json()["choices"][0]["message"]["content"] == "w0 w1 w2 w3 w4"
    assert "data: [DONE]" in events
    assert upstream.requests == []  # the operator's upstream saw nothing
    assert [s["authorization"] for s in user_base.seen] == [f"Bearer {KEY}"] * 2
    assert user_base.requests[0]["provider"] == {"x": 1}
    assert "max_tokens" not in user_base.requests[0]  # the user's own limits, none added
    spans = _spans(run, 2)
    assert len(spans) == 2
    estimate = PROMPT_TOKENS * INPUT_PRICE // 10**6 + 5 * OUTPUT_PRICE // 10**6
    for span in spans:
        assert span.attributes["belvedir.router.billed_to"] == "provider"
        assert span.attributes["belvedir.router.estimated_cost_micros"] == estimate
        assert span.attributes["belvedir.router.cost_micros"] == 0
        assert (span.input_tokens, span.output_tokens) == (PROMPT_TOKENS, 5)
        assert span.from_router and span.session.external_id == run.pk
    run.refresh_from_db()
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (0, 0)
    assert KEY not in json.dumps([s.attributes for s in spans]) + whole.text + events


def test_a_model_the_catalog_does_not_price_is_forwarded_without_an_estimate(
    owner, harness, user_base, upstream, router_url
):
    run = _own_key_run(owner, harness, user_base.base_url, model="acme/unpriced")

    response = _post(router_url, run, {"model": "acme/unpriced", "messages": QUESTION})

    assert response.status_code == 200
    (span,) = _spans(run, 1)
    assert span.attributes["belvedir.router.billed_to"] == "provider"
    assert "belvedir.router.estimated_cost_micros" not in span.attributes


def test_the_users_providers_errors_come_back_openai_style_without_the_key(
    owner, harness, covered_model, user_base, upstream, router_url
):
    run = _own_key_run(owner, harness, user_base.base_url)
    refused = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
    user_base.fail = (401, json.dumps(refused).encode())
    unauthorized = _post(router_url, run, {"model": MODEL, "messages": QUESTION})
    user_base.fail = (500, b"<html>Internal Server Error at 10.0.0.3 " + KEY.encode() + b"</html>")
    broken = _post(router_url, run, {"model": MODEL, "messages": QUESTION})

    # The user's own key refused: the user's error to fix (not the platform's account).
    assert unauthorized.status_code == 401
    assert unauthorized.json()["error"]["message"] == "Incorrect API key provided: [redacted]"
    assert broken.status_code == 500
    assert set(broken.json()) == {"error"}
    assert broken.headers["content-type"] == "application/json"
    assert KEY not in unauthorized.text + broken.text
    spans = _spans(run, 2)
    assert KEY not in json.dumps([[s.attributes, s.status_message] for s in spans])


def _production_env(**extra) -> dict[str, str]:
    """A router under BELVEDIR_DEV=0 reading this test's database and keys."""
    return {
        "BELVEDIR_DEV": "0",
        "SECRET_KEY": django_settings.SECRET_KEY,
        "API_KEY_HASH_SECRET": django_settings.API_KEY_HASH_SECRET,
        "FIELD_ENCRYPTION_KEY": ",".join(django_settings.FIELD_ENCRYPTION_KEYS),
        **extra,
    }


def test_each_call_checks_the_base_again_refusing_an_internal_one_unless_allow_listed(
    owner, harness, covered_model, user_base, upstream, serve_router
):
    # The run's stored base is the fake on 127.0.0.1 (as if the launch had allowed it).
    run = _own_key_run(owner, harness, user_base.base_url)
    production = serve_router(**_production_env())
    allowed = serve_router(**_production_env(BELVEDIR_MODEL_HOST_ALLOWLIST="127.0.0.1/32"))

    refused = _post(production, run, {"model": MODEL, "messages": QUESTION})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "model_base_refused"
    assert "loopback" in refused.json()["error"]["message"]
    assert user_base.requests == []

    answered = _post(allowed, run, {"model": MODEL, "messages": QUESTION})
    assert answered.status_code == 200, answered.text
    assert [s["authorization"] for s in user_base.seen] == [f"Bearer {KEY}"]


def test_a_call_carrying_an_sdk_spans_traceparent_is_recorded_under_it(
    owner, harness, covered_model, user_base, upstream, router_url
):
    run = _own_key_run(owner, harness, user_base.base_url)
    trace_id, parent = "ab" * 16, "cd" * 8

    response = _post(
        router_url,
        run,
        {"model": MODEL, "messages": QUESTION},
        traceparent=f"00-{trace_id}-{parent}-01",
    )

    assert response.status_code == 200
    (span,) = _spans(run, 1)
    assert (span.trace_id, span.parent_span_id) == (trace_id, parent)


def test_a_covered_model_and_an_own_key_judge_each_go_their_own_way(
    owner, harness, covered_model, user_base, upstream, router_url
):
    from belvedir import crypto as crypto_
    from harnesses.env_secrets import secrets_encrypt

    # The judge's key came from the harness's (secret) env, not the launch.
    run = make_run(
        owner.project,
        harness,
        cap_micros=2_000_000,
        judge_model="acme/judge",
        judge_proxied=True,
        judge_api_base_resolved=user_base.base_url,
        harness_env_secrets_encrypted=secrets_encrypt({"JUDGE_API_KEY": KEY}),
        judge_api_key_encrypted=crypto_.encrypt(""),
    )

    covered = _post(router_url, run, {"model": MODEL, "messages": QUESTION})
    judged = _post(router_url, run, {"model": "acme/judge", "messages": QUESTION})

    assert (covered.status_code, judged.status_code) == (200, 200), covered.text + judged.text
    assert [r["model"] for r in upstream.requests] == [MODEL]  # the operator's, capped
    assert [r["model"] for r in user_base.requests] == ["acme/judge"]
    assert [s["authorization"] for s in user_base.seen] == [f"Bearer {KEY}"]
    spans = {s.model: s for s in _spans(run, 2)}
    assert spans[MODEL].attributes["belvedir.router.cost_micros"] > 0
    assert "belvedir.router.billed_to" not in spans[MODEL].attributes
    assert spans["acme/judge"].attributes["belvedir.router.billed_to"] == "provider"
    run.refresh_from_db()
    assert run.covered_spent_micros == spans[MODEL].attributes["belvedir.router.cost_micros"]


@pytest.mark.docker
def test_a_launch_with_an_own_key_judge_gives_the_sandbox_the_router_for_it(owner, make_harness):
    from runs import contract
    from runs import services as run_services

    harness = make_harness(name="judged", env={"JUDGE_API_KEY": KEY})
    run = run_services.run_launch(
        project=owner.project,
        harness=harness,
        model="acme/model",
        model_api_key="sk-model-own-1234",
        judge_model="acme/judge",
    )
    env = contract.run_sandbox_env(run, secrets=contract.run_model_secrets(run))

    assert run.model_proxied and run.judge_proxied and not run.covered
    router = f"{django_settings.BELVEDIR_SANDBOX_BASE_URL}/api/v1"
    assert env["MODEL_API_BASE"] == env["JUDGE_API_BASE"] == router
    assert env["MODEL_API_KEY"] == env["JUDGE_API_KEY"] == env["BELVEDIR_API_KEY"]
    assert KEY not in env.values() and "sk-model-own-1234" not in env.values()
    assert run.judge_api_base_resolved == "https://openrouter.ai/api/v1"  # inferred
    body = owner.api.get(f"/api/v1/runs/{run.pk}").json()
    assert (body["model_proxied"], body["judge_proxied"], body["covered"]) == (True, True, False)
    assert KEY not in str(body) and "sk-model-own-1234" not in str(body)


def test_the_model_list_names_the_runs_own_key_models(owner, harness, user_base, router_url):
    run = _own_key_run(owner, harness, user_base.base_url, model="acme/own")

    response = httpx.get(
        f"{router_url}/models", headers={"Authorization": f"Bearer {run.plain_key}"}, timeout=30
    )

    assert response.status_code == 200
    assert response.json()["data"] == [
        {"id": "acme/own", "object": "model", "created": 0, "owned_by": "your provider"}
    ]


def test_an_own_key_anthropic_message_reaches_the_users_base_as_sent_billed_to_the_provider(
    owner, harness, covered_model, user_base, upstream, router_url
):
    run = _own_key_run(owner, harness, user_base.base_url)
    # Fields and a server tool the covered path refuses: the user's own business here.
    body = {
        "model": MODEL,
        "max_tokens": 10**6,
        "messages": QUESTION,
        "mcp_servers": [{"type": "url", "url": "https://mcp.example/"}],
        "stream": True,
    }
    headers = {"x-api-key": run.plain_key, "anthropic-version": "2023-06-01"}

    answer = httpx.post(f"{router_url}/messages", json=body, headers=headers, timeout=30)

    assert answer.status_code == 200, answer.text
    assert "event: message_stop" in answer.text
    assert upstream.requests == []  # the operator's upstream saw nothing
    (seen,), (forwarded,) = user_base.seen, user_base.requests
    assert (seen["path"], seen["authorization"]) == ("/v1/messages", f"Bearer {KEY}")
    assert forwarded["max_tokens"] == 10**6 and forwarded["mcp_servers"] == body["mcp_servers"]
    assert "stream_options" not in forwarded  # an OpenAI field, not Anthropic's
    (span,) = _spans(run, 1)
    assert span.attributes["belvedir.router.billed_to"] == "provider"
    assert (span.input_tokens, span.output_tokens) == (PROMPT_TOKENS, 5)
    assert KEY not in answer.text and KEY not in json.dumps(span.attributes)
    run.refresh_from_db()
    assert run.covered_spent_micros == 0
