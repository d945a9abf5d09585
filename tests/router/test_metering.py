"""Calls through the router (served by uvicorn) with the real `openai` client: forwarded to the
upstream, metered from the usage, settled against the run, recorded as spans."""

import httpx
import openai
import pytest

from billing.pricing import Price, worst_case_micros
from runs.models import Run
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, make_run, settled
from traces.models import Span

PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
# The fake answers 5 words: 11 prompt tokens at 1 micro-dollar, 5 completion tokens at 2.
COST = PROMPT_TOKENS * 1 + 5 * 2

pytestmark = pytest.mark.django_db(transaction=True)


def _client(router_url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=router_url, api_key=key, max_retries=0)


def test_a_call_is_forwarded_with_the_operators_key_metered_and_settled_on_the_run(
    covered_run, router_url, upstream
):
    reply = _client(router_url, covered_run.plain_key).chat.completions.create(
        model=MODEL, messages=MESSAGES
    )

    assert reply.choices[0].message.content == "w0 w1 w2 w3 w4"
    assert reply.usage.prompt_tokens == PROMPT_TOKENS
    assert upstream.requests[0]["max_tokens"] == MAX_OUTPUT  # the model's cap, reserved for
    run = settled(covered_run, spans=1)
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, 0)
    span = Span.objects.get(run=run)
    assert span.session.external_id == run.pk
    assert (span.is_llm, span.model, span.input_tokens, span.output_tokens) == (
        True,
        MODEL,
        PROMPT_TOKENS,
        5,
    )
    assert span.input_messages == [{"role": "user", "content": "What is 2 + 2?"}]
    assert span.output_messages[0]["content"] == "w0 w1 w2 w3 w4"
    assert span.attributes["belvedir.router.cost_micros"] == COST
    assert span.status_code == "ok"


def test_a_streamed_call_passes_the_events_through_and_is_metered_from_the_last_chunks_usage(
    covered_run, router_url, upstream
):
    stream = _client(router_url, covered_run.plain_key).chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, max_tokens=20
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "w0 w1 w2 w3 w4"
    assert chunks[-1].usage.completion_tokens == 5  # usage asked for upstream, passed through
    assert upstream.requests[0]["stream_options"] == {"include_usage": True}
    assert upstream.requests[0]["max_tokens"] == 20
    run = settled(covered_run, spans=1)  # with the next batch, after the stream's end
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, 0)
    span = Span.objects.get(run=run)
    assert span.attributes["belvedir.router.streamed"] is True
    assert (span.output_tokens, span.output_messages[0]["content"]) == (5, "w0 w1 w2 w3 w4")


def test_past_the_cap_the_router_answers_402_which_the_openai_client_raises_as_a_typed_error(
    owner, harness, covered_model, router_url, upstream
):

    worst = worst_case_micros(PRICE, {"model": MODEL, "messages": MESSAGES})
    run = make_run(owner.project, harness, cap_micros=worst + COST - 1)  # room for one call
    client = _client(router_url, run.plain_key)
    client.chat.completions.create(model=MODEL, messages=MESSAGES)

    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert refused.value.status_code == 402
    assert type(refused.value) is openai.APIStatusError  # no subclass of its own for 402
    assert refused.value.body["type"] == "insufficient_quota"
    assert refused.value.body["code"] == "spend_cap_reached"
    assert len(upstream.requests) == 1  # the refused call never reached the upstream
    run = settled(run, spans=2)
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, 0)
    refusal = Span.objects.get(run=run, status_code="error")
    assert "spend cap" in refusal.status_message
    assert refusal.attributes["http.response.status_code"] == 402
    assert refusal.attributes["belvedir.router.cost_micros"] == 0


def test_an_upstream_error_comes_back_openai_style_with_its_status_costs_nothing_and_is_traced(
    covered_run, router_url, upstream
):
    upstream.fail = (429, b'{"error": {"message": "slow down", "type": "rate_limit_error"}}')

    with pytest.raises(openai.RateLimitError) as failed:
        _client(router_url, covered_run.plain_key).chat.completions.create(
            model=MODEL, messages=MESSAGES
        )

    assert failed.value.body["message"] == "slow down"
    run = Run.objects.get(pk=covered_run.pk)
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (0, 0)
    span = Span.objects.get(run=run)
    assert (span.status_code, span.status_message) == ("error", "slow down")
    assert span.attributes["http.response.status_code"] == 429


def test_an_upstream_error_that_is_not_json_is_wrapped_in_an_openai_error_with_its_status(
    covered_run, router_url, upstream
):
    upstream.fail = (500, b"<html>gateway trouble</html>")

    response = httpx.post(
        f"{router_url}/chat/completions",
        json={"model": MODEL, "messages": MESSAGES, "stream": True},
        headers={"Authorization": f"Bearer {covered_run.plain_key}"},
    )

    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "upstream_error"
    assert "gateway trouble" in error["message"]
    assert Span.objects.get(run=covered_run).status_code == "error"


def test_a_slow_upstream_times_out_as_a_504_charged_its_reserved_worst_case(
    covered_run, serve_router, upstream
):
    upstream.delay = 3
    router_url = serve_router(BELVEDIR_ROUTER_UPSTREAM_TIMEOUT="0.5")

    with pytest.raises(openai.APIStatusError) as failed:
        _client(router_url, covered_run.plain_key).chat.completions.create(
            model=MODEL, messages=MESSAGES
        )

    assert failed.value.status_code == 504
    assert failed.value.body["code"] == "timeout"
    run = settled(covered_run, spans=1)
    # The request reached the upstream, which may bill it: the reserved worst case is charged.
    worst = worst_case_micros(PRICE, {"model": MODEL, "messages": MESSAGES})
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (worst, 0)
    assert Span.objects.get(run=run).status_message == "The upstream did not answer in time."
