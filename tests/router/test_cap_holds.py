"""The cap holds against any upstream (issue 25, item 1): a call is charged at most what it
reserved, whatever usage the upstream reports, so any number of concurrent calls never take
`covered_spent_micros` past the run's cap; what the upstream reported past a reservation is
recorded on the call's span and on the run (the operator's "upstream reported more than
reserved"), and a run whose cap is reached admits no further call.

The attack: a local fake upstream reporting, per call, no usage at all, exactly the reserved
bound, or far past it (a provider-side system prompt, a model that tokenizes otherwise), for
calls streamed and not, all at once through one uvicorn process on PostgreSQL."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.pricing import Price, output_tokens_limit, prompt_tokens_estimate, worst_case_micros
from tests.helpers.hypothesis_profiles import examples
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, make_run, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)
FAR = 10**6  # prompt tokens far past any reservation here ($1 of input at the fake's price)


def _body(i: int, *, stream: bool) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"call {i:03d}"}],
        "stream": stream,
    }


WORST = worst_case_micros(PRICE, _body(0, stream=False))  # the same for every call here


def _reported(kind: str, body: dict) -> dict:
    """The usage the fake reports for a call of `kind`: none (zero tokens), the reserved bound
    exactly, or a prompt far past the reservation."""
    if kind == "zero":
        prompt, completion = 0, 0
    elif kind == "bound":
        prompt, completion = prompt_tokens_estimate(body), output_tokens_limit(PRICE, body)
    else:
        prompt, completion = FAR, output_tokens_limit(PRICE, body)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0}


def _reported_cost(usage: dict) -> int:
    return usage["prompt_tokens"] * 1 + usage["completion_tokens"] * 2  # the fake's prices


def _call_all(router_url: str, key: str, bodies: list[dict]) -> list[int]:
    headers = {"Authorization": f"Bearer {key}"}

    def call(body: dict) -> int:
        with httpx.Client(timeout=60) as http:
            with http.stream(
                "POST", f"{router_url}/chat/completions", json=body, headers=headers
            ) as response:
                response.read()
                return response.status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(call, bodies))


def _index(body: dict) -> int:
    return int(body["messages"][0]["content"].split()[1])


@settings(
    max_examples=examples(20),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["zero", "bound", "far"]), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    cap_calls=st.integers(min_value=0, max_value=12),
    slack=st.integers(min_value=0, max_value=WORST - 1),
)
def test_any_number_of_concurrent_calls_reporting_any_usage_never_pass_the_cap(
    owner, harness, covered_model, router_url, upstream, calls, cap_calls, slack
):
    kinds = {i: kind for i, (kind, _) in enumerate(calls)}
    upstream.delay = 0.05  # the calls are in flight together
    upstream.usage_of = lambda body: _reported(kinds[_index(body)], body)
    run = make_run(owner.project, harness, cap_micros=WORST * cap_calls + slack)
    bodies = [_body(i, stream=stream) for i, (_, stream) in enumerate(calls)]
    before = len(upstream.requests)

    statuses = _call_all(router_url, run.plain_key, bodies)

    run = settled(run, spans=len(calls))
    assert run.covered_spent_micros <= run.covered_cap_micros, (run.covered_spent_micros, calls)
    assert set(statuses) <= {200, 402}, statuses
    served = [_index(body) for body in upstream.requests[before:]]
    assert len(served) == statuses.count(200)
    excess = sum(max(_reported_cost(_reported(kinds[i], bodies[i])) - WORST, 0) for i in served)
    assert run.covered_excess_micros == excess
    assert run.covered_excess_calls == sum(1 for i in served if kinds[i] == "far")
    charged = sum(s.attributes["belvedir.router.cost_micros"] for s in Span.objects.filter(run=run))
    assert charged == run.covered_spent_micros


def test_forty_concurrent_calls_against_a_five_cent_cap_settle_at_most_five_cents(
    owner, harness, covered_model, router_url, upstream
):
    """The reported overshoot: 40 concurrent calls, a $0.05 cap, an upstream reporting more
    prompt tokens than the reservation estimated, settled $0.18. Now each is charged what it
    reserved, the rest recorded as the upstream's excess, on its span and on the run."""
    upstream.delay = 0.3
    upstream.usage_of = lambda body: _reported("far", body)
    run = make_run(owner.project, harness, cap_micros=50_000)
    bodies = [_body(i, stream=i % 2 == 0) for i in range(40)]

    statuses = _call_all(router_url, run.plain_key, bodies)

    assert statuses == [200] * 40
    run = settled(run, spans=40)
    assert run.covered_spent_micros == 40 * WORST <= 50_000
    far = _reported_cost(_reported("far", bodies[1]))
    assert (run.covered_excess_calls, run.covered_excess_micros) == (40, 40 * (far - WORST))
    for span in Span.objects.filter(run=run):
        assert span.attributes["belvedir.router.cost_micros"] == WORST
        assert span.attributes["belvedir.router.excess_micros"] == far - WORST
        assert span.attributes["gen_ai.usage.input_tokens"] == FAR  # what the upstream said


def test_a_run_whose_cap_is_reached_admits_no_further_call(
    owner, harness, covered_model, router_url, upstream
):
    upstream.delay = 0.3
    upstream.usage_of = lambda body: _reported("far", body)
    run = make_run(owner.project, harness, cap_micros=WORST * 8)  # room for exactly eight
    bodies = [_body(i, stream=i % 2 == 0) for i in range(40)]

    statuses = _call_all(router_url, run.plain_key, bodies)

    assert (statuses.count(200), statuses.count(402)) == (8, 32), statuses
    run = settled(run, spans=40)
    assert run.covered_spent_micros == run.covered_cap_micros
    forwarded = len(upstream.requests)
    upstream.usage_of = lambda body: _reported("zero", body)
    for stream in (False, True):
        answer = httpx.post(
            f"{router_url}/chat/completions",
            json=_body(999, stream=stream),
            headers={"Authorization": f"Bearer {run.plain_key}"},
            timeout=30,
        )
        assert answer.status_code == 402
        assert answer.json()["error"]["code"] == "spend_cap_reached"
    assert len(upstream.requests) == forwarded
