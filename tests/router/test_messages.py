"""Anthropic's Messages API through the router (`POST /api/v1/messages`, for claude-code and
Anthropic SDK users whose ANTHROPIC_BASE_URL is the platform's /api): the run key as
`x-api-key` or a bearer token, forwarded to the upstream's /v1/messages with the operator's
key, the worst case reserved from max_tokens, metered from the usage of the answer or of
message_start and message_delta, one LLM span each; any other path a 404 unless the operator
lets it through."""

import json

import httpx
import pytest

from billing.pricing import Price, cost_micros
from router.endpoints import ENDPOINTS
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)
COST = cost_micros(PRICE, input_tokens=PROMPT_TOKENS, output_tokens=5)
REPLY = "w0 w1 w2 w3 w4"
BODY = {
    "model": MODEL,
    "max_tokens": 50,
    "system": "You are terse.",
    "messages": [{"role": "user", "content": [{"type": "text", "text": "2 + 2?"}]}],
}


def _post(router_url: str, key: str, body: dict, **headers) -> httpx.Response:
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01", **headers}
    return httpx.post(f"{router_url}/messages", json=body, headers=headers, timeout=30)


def _span(run) -> Span:
    return Span.objects.get(run=settled(run, spans=1))


def test_a_message_is_forwarded_with_the_operators_key_metered_and_traced(
    covered_run, router_url, upstream
):
    answer = _post(router_url, covered_run.plain_key, {**BODY, "top_k": 5, "x_unknown": 1})

    assert answer.status_code == 200, answer.text
    assert answer.json()["content"][0]["text"] == REPLY
    headers, forwarded = upstream.headers[0], upstream.requests[0]
    assert upstream.seen[0]["path"] == "/v1/messages"
    assert headers["authorization"] == "Bearer sk-upstream-operator"
    assert covered_run.plain_key not in json.dumps(headers)
    assert headers["anthropic-version"] == "2023-06-01"
    assert (forwarded["max_tokens"], forwarded["top_k"], forwarded["system"]) == (
        50,
        5,
        "You are terse.",
    )
    assert "x_unknown" not in forwarded
    span = _span(covered_run)
    assert (span.run.covered_spent_micros, span.run.covered_reserved_micros) == (COST, 0)
    assert (span.model, span.input_tokens, span.output_tokens) == (MODEL, PROMPT_TOKENS, 5)
    assert span.input_messages[0] == {"role": "system", "content": "You are terse."}
    assert span.output_messages[0]["content"] == REPLY
    assert span.attributes["belvedir.router.cost_micros"] == COST


def test_a_streamed_message_passes_anthropics_events_through_and_is_metered_from_them(
    covered_run, router_url, upstream
):
    answer = _post(router_url, covered_run.plain_key, {**BODY, "stream": True})

    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    names = [line[7:] for line in answer.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "stream_options" not in upstream.requests[0]  # an OpenAI field, not Anthropic's
    span = _span(covered_run)
    assert span.attributes["belvedir.router.streamed"] is True
    assert (span.input_tokens, span.output_tokens) == (PROMPT_TOKENS, 5)
    assert span.output_messages[0]["content"] == REPLY
    assert span.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert span.run.covered_spent_micros == COST


def test_a_bearer_token_works_too_and_a_bare_claude_name_is_the_catalogs_anthropic_id(
    owner, harness, covered_model, router_url, upstream
):
    from models_registry.models import CoveredModel
    from tests.router.helpers import make_run

    CoveredModel.objects.create(
        model_id="anthropic/claude-fake-4.5",
        display_name="Claude (fake)",
        lab=covered_model.lab,
        input_price_micros=INPUT_PRICE,
        output_price_micros=OUTPUT_PRICE,
        max_output_tokens=MAX_OUTPUT,
    )
    run = make_run(owner.project, harness, cap_micros=1_000_000, model="anthropic/claude-fake-4.5")
    headers = {"x-api-key": "", "Authorization": f"Bearer {run.plain_key}"}

    answer = _post(router_url, "", {**BODY, "model": "claude-fake-4.5"}, **headers)

    assert answer.status_code == 200, answer.text
    assert upstream.requests[0]["model"] == "anthropic/claude-fake-4.5"
    assert _span(run).attributes["gen_ai.request.model"] == "anthropic/claude-fake-4.5"


def test_the_worst_case_is_bounded_by_max_tokens_and_the_thinking_budget_under_it():
    endpoint = ENDPOINTS["messages"]
    body = {**BODY, "max_tokens": 10**6, "thinking": {"type": "enabled", "budget_tokens": 10**6}}

    limit = endpoint.output_limit(PRICE, body)
    forwarded = endpoint.forwarded_body(body, limit)

    assert limit == MAX_OUTPUT  # never past the model's cap
    assert forwarded["max_tokens"] == forwarded["thinking"]["budget_tokens"] == MAX_OUTPUT
    image = {"type": "image", "source": {"type": "base64", "data": "A" * 300_000}}
    with_image = {**BODY, "messages": [{"role": "user", "content": [image]}]}
    assert endpoint.prompt_tokens(with_image) < 2_000  # an image's allowance, not its bytes


def test_claude_codes_own_fields_reach_a_covered_model(covered_run, router_url, upstream):
    """Claude Code sends context editing, an output effort and Anthropic's automatic prompt
    caching: none bills more than the tokens the reservation bounds (a cache write is priced
    at its rate, `billing.pricing.ANTHROPIC_CACHE`), so a covered run passes them on rather
    than dropping them under the agent."""
    fields = {
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "output_config": {"effort": "high"},
        "cache_control": {"type": "ephemeral"},
    }

    answer = _post(router_url, covered_run.plain_key, {**BODY, **fields})

    assert answer.status_code == 200, answer.text
    forwarded = upstream.requests[0]
    assert {name: forwarded.get(name) for name in fields} == fields
    settled(covered_run, spans=1)


@pytest.mark.parametrize(
    "field, value",
    [
        ("mcp_servers", [{"type": "url", "url": "https://example.invalid/mcp", "name": "x"}]),
        ("container", "container_1"),
        ("service_tier", "priority"),
        ("tools", [{"type": "web_search_20250305", "name": "web_search"}]),
    ],
)
def test_a_field_that_adds_billed_work_upstream_is_refused_naming_it(
    covered_run, router_url, upstream, field, value
):
    answer = _post(router_url, covered_run.plain_key, {**BODY, field: value})

    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == field
    assert upstream.requests == []


def test_a_beta_that_bills_at_other_prices_is_not_passed_on(covered_run, router_url, upstream):
    beta = "context-1m-2025-08-07, interleaved-thinking-2025-05-14"

    answer = _post(router_url, covered_run.plain_key, BODY, **{"anthropic-beta": beta})

    assert answer.status_code == 200
    assert upstream.headers[0]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    settled(covered_run, spans=1)


def test_a_wrong_key_is_refused_before_anything_is_forwarded(covered_run, router_url, upstream):
    answer = _post(router_url, "bv_live_not-a-key", BODY)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_api_key"
    assert upstream.requests == []


def test_an_unknown_path_is_an_openai_style_404_and_nothing_reaches_the_upstream(
    covered_run, router_url, upstream
):
    headers = {"x-api-key": covered_run.plain_key}
    answer = httpx.post(f"{router_url}/messages/count_tokens", json=BODY, headers=headers)

    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "unknown_url"
    assert upstream.requests == []


def test_with_passthrough_on_an_unknown_path_reaches_the_upstream_untraced_and_uncharged(
    owner, covered_run, serve_router, upstream
):
    from belvedir.models import ApiKey
    from belvedir.services import api_key_create

    _, project_key = api_key_create(project=owner.project, name="ci", kind=ApiKey.Kind.PROJECT)
    router_url = serve_router(BELVEDIR_ROUTER_PASSTHROUGH="1")
    headers = {"x-api-key": covered_run.plain_key, "anthropic-version": "2023-06-01"}

    answer = httpx.post(f"{router_url}/messages/count_tokens", json=BODY, headers=headers)
    refused = httpx.post(
        f"{router_url}/messages/count_tokens",
        json=BODY,
        headers={"Authorization": f"Bearer {project_key}"},
    )
    above = httpx.post(f"{router_url}/a/..%2F..%2Fkeys", json=BODY, headers=headers)

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"input_tokens": 42}
    (seen,) = upstream.seen
    assert seen["path"] == "/v1/messages/count_tokens"
    assert seen["authorization"] == "Bearer sk-upstream-operator"
    assert refused.status_code == 403  # a project key is no run's
    assert above.status_code in (400, 404)
    covered_run.refresh_from_db()
    assert covered_run.covered_spent_micros == 0
    assert not Span.objects.filter(run=covered_run).exists()


def test_with_passthrough_on_only_the_listed_calls_pass_and_nothing_else_reaches_the_upstream(
    covered_run, serve_router, upstream
):
    """An upstream's batch endpoint bills (and is untraced here), its files and account
    endpoints read what other organizations' runs stored under the operator's key: only the
    calls BELVEDIR_ROUTER_PASSTHROUGH_CALLS lists pass (by default POST messages/count_tokens)."""
    router_url = serve_router(BELVEDIR_ROUTER_PASSTHROUGH="1")
    headers = {"x-api-key": covered_run.plain_key, "anthropic-version": "2023-06-01"}
    with httpx.Client(headers=headers, timeout=30) as http:
        answers = [
            http.post(f"{router_url}/messages/batches", json={"requests": [BODY] * 3}),
            http.get(f"{router_url}/files"),
            http.get(f"{router_url}/files/file-1/content"),
            http.delete(f"{router_url}/files/file-1"),
            http.get(f"{router_url}/credits"),
            http.get(f"{router_url}/messages/count_tokens"),  # listed only as a POST
        ]

    assert [a.status_code for a in answers] == [404] * 6
    assert {a.json()["error"]["code"] for a in answers} == {"unknown_url"}
    assert upstream.requests == [] and upstream.seen == []


def test_the_passthrough_calls_setting_names_itself_when_an_entry_is_not_method_and_path(
    monkeypatch,
):
    from django.core.exceptions import ImproperlyConfigured

    from belvedir.settings.model_router import _passthrough_calls

    monkeypatch.setenv("BELVEDIR_ROUTER_PASSTHROUGH_CALLS", "post /messages/count_tokens, GET a")
    assert _passthrough_calls("BELVEDIR_ROUTER_PASSTHROUGH_CALLS", []) == {
        ("POST", "messages/count_tokens"),
        ("GET", "a"),
    }
    monkeypatch.setenv("BELVEDIR_ROUTER_PASSTHROUGH_CALLS", "messages/batches")
    with pytest.raises(ImproperlyConfigured, match="BELVEDIR_ROUTER_PASSTHROUGH_CALLS"):
        _passthrough_calls("BELVEDIR_ROUTER_PASSTHROUGH_CALLS", [])


@pytest.mark.parametrize(
    "rest", ["../keys", "a/../../keys", "a/./b", "/etc", "a//b", "a%2Fb", "a?b", "credits\n"]
)
def test_a_passed_through_path_never_leaves_the_upstreams_base(rest):
    from router.passthrough import plain_path

    assert not plain_path(rest)
    assert plain_path("messages/count_tokens")


def test_a_client_gone_mid_message_stream_is_settled_from_what_came_through(
    covered_run, router_url, upstream
):
    """No message_delta came, so no output usage: the input is message_start's and the output
    what came through, never past the reservation; the upstream stream is closed."""
    import time

    upstream.words, upstream.chunk_delay = 80, 0.05  # four seconds of words
    body = {**BODY, "stream": True}
    headers = {"x-api-key": covered_run.plain_key, "anthropic-version": "2023-06-01"}
    deltas = 0
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{router_url}/messages", json=body, headers=headers) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                deltas += line == "event: content_block_delta"
                if deltas == 3:
                    break  # and the connection closes

    span = _span(covered_run)
    run = span.run
    worst = ENDPOINTS["messages"].worst_case(PRICE, BODY)
    assert span.status_message == "The client disconnected mid-stream."
    assert 3 <= span.output_tokens < 80  # what came through, not the whole answer
    assert span.input_tokens == PROMPT_TOKENS  # as message_start reported it
    assert 0 < run.covered_spent_micros <= worst
    assert run.covered_spent_micros == span.attributes["belvedir.router.cost_micros"]
    deadline = time.monotonic() + 10
    while upstream.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert upstream.disconnects == 1


def test_an_own_key_for_anthropics_own_api_goes_as_x_api_key_and_openrouters_as_a_bearer():
    from router.targets import Target, covered_target

    messages = ENDPOINTS["messages"]
    own = Target(base="https://api.anthropic.com/v1/", key="sk-ant-own", covered=False)
    router = Target(base="https://openrouter.ai/api/v1", key="sk-or-own", covered=False)
    lookalike = Target(base="https://api.anthropic.com.evil.test/v1", key="k", covered=False)

    anthropic = messages.authorized(own, own.headers(**{"anthropic-version": "2023-06-01"}))
    assert anthropic["x-api-key"] == "sk-ant-own" and "Authorization" not in anthropic
    assert anthropic["anthropic-version"] == "2023-06-01"
    assert messages.authorized(router, router.headers())["Authorization"] == "Bearer sk-or-own"
    assert "x-api-key" not in messages.authorized(lookalike, lookalike.headers())
    covered = covered_target()
    assert "x-api-key" not in messages.authorized(covered, covered.headers())
    # Other endpoints keep the bearer whatever the base.
    assert ENDPOINTS["chat/completions"].authorized(own, own.headers())["Authorization"]
