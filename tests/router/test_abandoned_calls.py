"""Calls whose client goes away, or whose upstream fails, after the request went upstream are
charged their reserved worst case (the upstream may bill them: a dropped connection does not
stop a non-streamed completion); a request that never left costs nothing; a client gone while
its call was being admitted leaves no reservation behind; a call settles once."""

import threading
import time

import httpx
import pytest
from django.db import IntegrityError, connections, transaction

from billing.pricing import Price, worst_case_micros
from runs.models import Run
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, free_port, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Count."}]}
WORST = worst_case_micros(Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT), BODY)


def _headers(run) -> dict:
    return {"Authorization": f"Bearer {run.plain_key}"}


def test_a_client_that_gives_up_before_a_non_streamed_answer_pays_the_reserved_worst_case(
    covered_run, router_url, upstream
):
    upstream.delay = 3
    for _ in range(2):
        with pytest.raises(httpx.ReadTimeout):
            url = f"{router_url}/chat/completions"
            httpx.post(url, json=BODY, headers=_headers(covered_run), timeout=1)

    run = settled(covered_run, spans=2)
    assert len(upstream.requests) == 2  # both reached the upstream, which bills them
    assert run.covered_spent_micros == 2 * WORST
    for span in Span.objects.filter(run=run):
        assert span.status_message == "The client disconnected."
        assert span.attributes["belvedir.router.cost_micros"] == WORST


def test_an_upstream_that_cannot_be_reached_costs_nothing(covered_run, serve_router):
    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    router_url = serve_router(BELVEDIR_ROUTER_UPSTREAM_BASE=closed)

    answer = httpx.post(f"{router_url}/chat/completions", json=BODY, headers=_headers(covered_run))

    assert answer.status_code == 502
    assert answer.json()["error"]["message"] == "The upstream could not be reached: ConnectError."
    run = settled(covered_run, spans=1)
    assert run.covered_spent_micros == 0


class _RunRowLock:
    """Holds the run's row lock from another connection, so a reservation waits on it."""

    def __init__(self, run):
        self.run, self.locked, self.release = run, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold)

    def _hold(self):
        try:
            with transaction.atomic():
                Run.objects.select_for_update().get(pk=self.run.pk)
                self.locked.set()
                self.release.wait(30)
        finally:
            connections.close_all()

    def __enter__(self):
        self.thread.start()
        assert self.locked.wait(10)
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join()


def _given_up_during_admission(router_url, run) -> None:
    with _RunRowLock(run):
        with pytest.raises(httpx.ReadTimeout):
            url = f"{router_url}/chat/completions"
            httpx.post(url, json=BODY, headers=_headers(run), timeout=1)
        time.sleep(0.5)  # the router has seen the disconnect while its reservation waits


def test_a_client_gone_while_its_call_is_admitted_leaves_no_reservation_and_is_traced(
    covered_run, router_url, upstream
):
    # First in a worker thread (the key not cached yet), then from the event loop (cached).
    _given_up_during_admission(router_url, covered_run)
    run = settled(covered_run, spans=1)
    assert httpx.post(f"{router_url}/chat/completions", json=BODY, headers=_headers(run)).is_success
    _given_up_during_admission(router_url, covered_run)

    run = settled(covered_run, spans=3)
    assert len(upstream.requests) == 1  # only the answered call went upstream
    abandoned = Span.objects.filter(
        run=run, attributes__contains={"http.response.status_code": 499}
    )
    assert [s.status_message for s in abandoned] == ["The client disconnected."] * 2
    assert [s.attributes["belvedir.router.cost_micros"] for s in abandoned] == [0, 0]
    assert (
        run.covered_spent_micros
        == Span.objects.get(run=run, status_code="ok").attributes["belvedir.router.cost_micros"]
    )


def test_a_stream_whose_client_leaves_while_it_is_settled_settles_once(
    covered_run, router_url, upstream
):
    upstream.words = 3
    body = {**BODY, "stream": True}
    with httpx.Client(timeout=30) as http:
        with http.stream(
            "POST", f"{router_url}/chat/completions", json=body, headers=_headers(covered_run)
        ) as answer:
            with _RunRowLock(covered_run):  # the settlement waits on the run's row
                for line in answer.iter_lines():
                    if '"usage"' in line:
                        break
                time.sleep(1)
                # and the client leaves while the settlement waits

    run = settled(covered_run, spans=1)
    time.sleep(1)  # a second settlement would have been written by now
    run.refresh_from_db()
    assert run.covered_reserved_micros == 0
    assert Span.objects.filter(run=run).count() == 1
    assert (
        run.covered_spent_micros
        == Span.objects.get(run=run).attributes["belvedir.router.cost_micros"]
    )


def test_a_call_hands_over_its_settlement_once():
    from router.calls import Call
    from router.services import Admission, CallRecord

    admission = Admission(key=None, run_id="r", price=Price(1, 1, 1), reserved_micros=5)
    call = CallRecord(model=MODEL, messages=[], started_ns=1)
    assert Call(call, admission).settlement().reserved_micros == 5
    assert Call(call, admission).settlement() is None  # a second path to settle finds it done


def test_the_database_refuses_a_reservation_released_twice(covered_run):
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=covered_run.pk).update(covered_reserved_micros=-1)
