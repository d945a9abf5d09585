"""Fifty calls at once against one run's cap, through one uvicorn process on PostgreSQL: the
worst case is reserved before each call is forwarded, so together they never pass the cap.

The upstream here uses every token a call may: each call costs exactly what it reserved, so a
cap with room for 8.5 calls serves 8 of the fifty and the settled costs stay under the cap."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from billing.pricing import Price, prompt_tokens_estimate, worst_case_micros
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, make_run, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = 50


def _body(i: int) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"question {i:02d}"}],
        "stream": i % 2 == 0,  # half streamed, half not
    }


def test_fifty_concurrent_calls_never_take_a_run_past_its_cap(
    owner, harness, covered_model, router_url, upstream
):
    upstream.delay = 0.3  # every call is in flight while the others arrive
    upstream.words = MAX_OUTPUT
    upstream.prompt_tokens = prompt_tokens_estimate(_body(10))
    worst = worst_case_micros(Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT), _body(10))
    run = make_run(owner.project, harness, cap_micros=worst * 8 + worst // 2)
    headers = {"Authorization": f"Bearer {run.plain_key}"}

    def call(i: int) -> int:
        with httpx.Client(timeout=60) as http:
            with http.stream(
                "POST", f"{router_url}/chat/completions", json=_body(i), headers=headers
            ) as response:
                response.read()
                return response.status_code

    with ThreadPoolExecutor(CALLS) as pool:
        statuses = list(pool.map(call, range(CALLS)))

    served, refused = statuses.count(200), statuses.count(402)
    assert (served, refused) == (8, CALLS - 8), statuses
    run = settled(run, spans=CALLS)
    assert run.covered_spent_micros == served * worst <= run.covered_cap_micros
    assert len(upstream.requests) == served
    assert Span.objects.filter(run=run).count() == CALLS  # the refused ones too
    assert Span.objects.filter(run=run, status_code="error").count() == refused
