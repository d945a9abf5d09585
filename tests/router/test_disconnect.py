"""A client that goes away mid-stream: the upstream call is cancelled, what was used is settled
on the run, and the call is recorded."""

import time

import httpx
import pytest

from billing.pricing import Price, worst_case_micros
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_client_disconnect_mid_stream_cancels_the_upstream_call_and_settles_what_was_used(
    covered_run, router_url, upstream
):
    upstream.words, upstream.chunk_delay = 80, 0.05  # four seconds of words
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Count."}], "stream": True}
    headers = {"Authorization": f"Bearer {covered_run.plain_key}"}
    received = []
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{router_url}/chat/completions", json=body, headers=headers) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data:"):
                    received.append(line)
                if len(received) == 3:
                    break  # and the connection closes

    run = settled(covered_run, spans=1)
    worst = worst_case_micros(Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT), body)
    span = Span.objects.get(run=run)
    assert span.status_message == "The client disconnected mid-stream."
    assert 3 <= span.output_tokens < 80  # what came through, not the whole answer
    assert 0 < run.covered_spent_micros < worst
    assert run.covered_spent_micros == span.attributes["belvedir.router.cost_micros"]
    deadline = time.monotonic() + 10
    while upstream.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert upstream.disconnects == 1  # the upstream stream was closed, not read to the end
