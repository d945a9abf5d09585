"""Anthropic's prompt cache, priced as Anthropic bills it: its usage reports the cache's writes
(`cache_creation_input_tokens`, split by time in `cache_creation`: 5 minutes at 1.25x the
input price, an hour at 2x) and reads (`cache_read_input_tokens`, 0.1x), in the answer or,
streamed, in `message_start` and `message_delta` (whose input counts may be null). The
reservation stays a bound on what settlement may charge: a prompt that asks for caching is
reserved as if written whole for the dearest time it asks for, so a cache-write-heavy call is
charged all of it with nothing past its reservation, and concurrent calls never pass the cap.
OpenRouter's chat usage of an Anthropic model (`prompt_tokens_details`) is priced the same; a
model the catalog has no cache prices for is charged its cached input at the input price."""

from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import httpx
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from billing.pricing import ANTHROPIC_CACHE, Price, Usage, usage_cost_micros
from models_registry.models import CoveredModel
from router.endpoints import ENDPOINTS
from tests.helpers.hypothesis_profiles import examples
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, make_run, settled
from traces.models import Span

CLAUDE = "anthropic/claude-fake-4.5"
PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT, ANTHROPIC_CACHE)  # 1 µ$ in, 2 out a token
MESSAGES = ENDPOINTS["messages"]
LONG = "the cached context " * 640  # 12,160 characters: ~4,000 tokens estimated


def _body(ttl: str | None = "1h", **extra) -> dict:
    marker = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return {
        "model": "claude-fake-4.5",
        "max_tokens": 50,
        "system": [{"type": "text", "text": LONG, "cache_control": marker}],
        "messages": [{"role": "user", "content": "2 + 2?"}],
        **extra,
    }


# 10 plain input tokens, 1,000 written (600 for 5 minutes, 400 for an hour), 2,000 read, 5 out.
CACHED = {
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "cache_creation_input_tokens": 1000,
    "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
    "cache_read_input_tokens": 2000,
}
CACHED_INPUT = 10 + 1000 + 2000
CACHED_COST = 10 + 600 * 5 // 4 + 400 * 2 + 2000 // 10 + 5 * 2  # 1,770 µ$ (3,020 at input price)


@pytest.fixture
def claude_run(owner, harness, covered_model):
    CoveredModel.objects.create(
        model_id=CLAUDE,
        display_name="Claude (fake)",
        lab=covered_model.lab,
        input_price_micros=INPUT_PRICE,
        output_price_micros=OUTPUT_PRICE,
        max_output_tokens=MAX_OUTPUT,
    )
    return make_run(owner.project, harness, cap_micros=1_000_000, model=CLAUDE)


def _post(router_url: str, run, body: dict, path: str = "messages") -> httpx.Response:
    headers = {"x-api-key": run.plain_key, "Authorization": f"Bearer {run.plain_key}"}
    return httpx.post(f"{router_url}/{path}", json=body, headers=headers, timeout=30)


def _span(run) -> Span:
    return Span.objects.get(run=settled(run, spans=1))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [False, True])
def test_a_messages_call_is_charged_anthropics_cache_rates_for_its_writes_and_reads(
    claude_run, router_url, upstream, stream
):
    # Streamed, message_delta says the output and repeats no input count (null), as
    # Anthropic's newer events may: message_start's counts stand.
    nulls = {"input_tokens": None, "cache_creation_input_tokens": None}
    upstream.usage_of = lambda body: {**CACHED, "message_delta_usage": nulls}

    answer = _post(router_url, claude_run, _body(stream=stream))

    assert answer.status_code == 200, answer.text
    span = _span(claude_run)
    assert span.run.covered_spent_micros == CACHED_COST
    assert span.attributes["belvedir.router.cost_micros"] == CACHED_COST
    assert (span.input_tokens, span.output_tokens) == (CACHED_INPUT, 5)
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 2000
    assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 1000
    assert span.attributes["belvedir.router.cache_creation_1h_input_tokens"] == 400
    assert span.run.covered_excess_calls == 0


def _all_written(ttl: str | None, *, split: bool):
    """What an upstream reports for a call whose whole prompt (as the router estimates it) was
    written to the cache for `ttl`, with the split by time or (older answers) without."""

    def usage(body: dict) -> dict:
        prompt = MESSAGES.prompt_tokens(body)
        reported = {"prompt_tokens": 0, "completion_tokens": body["max_tokens"]}
        reported["cache_creation_input_tokens"] = prompt
        if split:
            name = "ephemeral_1h_input_tokens" if ttl == "1h" else "ephemeral_5m_input_tokens"
            reported["cache_creation"] = {name: prompt}
        return reported

    return usage


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "ttl, split, rate",
    [("1h", True, Fraction(2)), (None, False, Fraction(5, 4)), ("1h", False, Fraction(2))],
)
def test_a_cache_write_heavy_call_is_charged_all_of_it_within_what_it_reserved(
    claude_run, router_url, upstream, ttl, split, rate
):
    """Its reservation priced the prompt as written for the dearest time its markers ask for;
    writes an answer does not split by time are priced at that time too."""
    upstream.usage_of = _all_written(ttl, split=split)
    body = _body(ttl)

    answer = _post(router_url, claude_run, body)

    assert answer.status_code == 200, answer.text
    run = settled(claude_run, spans=1)
    prompt = MESSAGES.prompt_tokens(body)
    cost = -(-(prompt * rate * INPUT_PRICE + 50 * OUTPUT_PRICE) // 10**6)
    assert run.covered_spent_micros == cost == MESSAGES.worst_case(PRICE, body)
    assert (run.covered_excess_calls, run.covered_excess_micros) == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_reporting_cache_writes_far_past_their_reservation_never_pass_the_cap(
    claude_run, router_url, upstream
):
    upstream.delay = 0.3  # all in flight together
    far = {"prompt_tokens": 0, "completion_tokens": 50, "cache_creation_input_tokens": 10**6}
    upstream.usage_of = lambda body: {**far, "cache_creation": {"ephemeral_1h_input_tokens": 10**6}}
    worst = MESSAGES.worst_case(PRICE, _body())
    claude_run.covered_cap_micros = worst * 5 + worst // 2
    claude_run.save(update_fields=["covered_cap_micros"])

    def call(i: int) -> int:
        with httpx.Client(timeout=60) as http:
            headers = {"x-api-key": claude_run.plain_key}
            body = _body(stream=i % 2 == 0)
            with http.stream("POST", f"{router_url}/messages", json=body, headers=headers) as r:
                r.read()
                return r.status_code

    with ThreadPoolExecutor(24) as pool:
        statuses = list(pool.map(call, range(24)))

    assert (statuses.count(200), statuses.count(402)) == (5, 19), statuses
    run = settled(claude_run, spans=24)
    assert run.covered_spent_micros == 5 * worst <= run.covered_cap_micros
    assert run.covered_excess_calls == 5
    assert run.covered_excess_micros == 5 * (2 * 10**6 + 100 - worst)


@pytest.mark.django_db(transaction=True)
def test_a_stream_cut_after_message_start_is_charged_its_reported_cache_usage(
    claude_run, router_url, upstream
):
    upstream.words, upstream.chunk_delay = 80, 0.05
    upstream.usage_of = lambda body: CACHED
    body = _body(stream=True)
    headers = {"x-api-key": claude_run.plain_key}
    deltas = 0
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{router_url}/messages", json=body, headers=headers) as r:
            for line in r.iter_lines():
                deltas += line == "event: content_block_delta"
                if deltas == 3:
                    break

    span = _span(claude_run)
    assert span.status_message == "The client disconnected mid-stream."
    assert span.input_tokens == CACHED_INPUT  # message_start's, not an estimate
    assert 3 <= span.output_tokens < 80
    input_cost = CACHED_COST - 5 * 2
    assert span.run.covered_spent_micros == input_cost + 2 * span.output_tokens


@pytest.mark.django_db(transaction=True)
def test_openrouters_chat_usage_of_an_anthropic_model_is_priced_at_anthropics_cache_rates(
    claude_run, router_url, upstream
):
    upstream.usage_of = lambda body: {
        "prompt_tokens": 3000,  # of which 2,000 read and 500 written (OpenRouter's details)
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 2000, "cache_write_tokens": 500},
    }
    text = {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}
    body = {"model": CLAUDE, "max_tokens": 50, "messages": [{"role": "user", "content": [text]}]}

    answer = _post(router_url, claude_run, body, path="chat/completions")

    assert answer.status_code == 200, answer.text
    run = settled(claude_run, spans=1)
    assert run.covered_spent_micros == 500 + 2000 // 10 + 500 * 5 // 4 + 5 * 2  # 1,335


@pytest.mark.django_db(transaction=True)
def test_a_model_without_cache_prices_is_charged_its_cached_input_at_the_input_price(
    covered_run, router_url, upstream
):
    """The catalog holds no cached price for it: none is made up."""
    upstream.usage_of = lambda body: {
        "prompt_tokens": 300,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 200},
    }
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi " * 400}]}

    answer = _post(router_url, covered_run, body, path="chat/completions")

    assert answer.status_code == 200, answer.text
    run = settled(covered_run, spans=1)
    assert run.covered_spent_micros == 300 + 5 * 2
    span = Span.objects.get(run=run)
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 200


def test_an_own_key_calls_estimate_counts_the_cache_at_its_rates():
    from router.endpoints.anthropic import anthropic_usage
    from router.services import Admission, CallRecord, Settlement
    from router.targets import Target

    own = Target(base="https://api.anthropic.com/v1", key="sk-ant-own", covered=False)
    admission = Admission(key=None, run_id="r", price=PRICE, reserved_micros=0, target=own)
    call = CallRecord(model=CLAUDE, messages=[], started_ns=1)
    usage = {**CACHED, "input_tokens": 10, "output_tokens": 5}
    call.use(anthropic_usage(usage))

    Settlement.of(admission, call)

    assert (call.cost_micros, call.estimated_cost_micros) == (0, CACHED_COST)


@hypothesis_settings(max_examples=examples(200))
@given(
    ttls=st.lists(st.sampled_from([None, "5m", "1h", "2h"]), max_size=3),
    shares=st.tuples(*[st.integers(min_value=0, max_value=100)] * 4),
    output=st.integers(min_value=0, max_value=MAX_OUTPUT),
    chat=st.booleans(),
)
def test_the_reservation_bounds_any_split_of_the_prompt_the_markers_allow(
    ttls, shares, output, chat
):
    """However an upstream splits the estimated prompt between plain input, reads and writes
    for the times the body's markers ask for, and whatever output under the limit, the cost
    is at most the reservation (chat completions of an Anthropic model too)."""
    endpoint = ENDPOINTS["chat/completions" if chat else "messages"]
    parts = [{"type": "text", "text": LONG[: 400 * (i + 1)]} for i in range(3)]
    for part, ttl in zip(parts, ttls, strict=False):
        part["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    body = {"model": CLAUDE, "max_tokens": 50, "messages": [{"role": "user", "content": parts}]}
    prompt = endpoint.prompt_tokens(body)
    plain, read, five, hour = shares
    if not ttls:
        five = hour = 0  # no marker: nothing is written
    if not any(ttl in ("1h", "2h") for ttl in ttls):
        hour = 0
    total = plain + read + five + hour or 1
    read, five, hour = (prompt * share // total for share in (read, five, hour))
    usage = Usage(prompt, min(output, 50), read, five, hour)

    assert usage_cost_micros(PRICE, usage) <= endpoint.worst_case(PRICE, body)
