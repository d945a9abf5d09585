"""Settlements written in batches after the answer (router/settlement.py): a call refused for
its cap while its run's settlements wait has them written and is tried again; the server's
shutdown writes what is pending; a batch that fails is written call by call, and a call
whose span cannot be stored still has its money settled."""

import asyncio

import httpx
import pytest

from billing.pricing import Price, worst_case_micros
from router import settlement
from router.services import CallRecord, Settlement
from runs.models import Run
from tests.helpers import aio
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import (
    INPUT_PRICE,
    MAX_OUTPUT,
    MODEL,
    OUTPUT_PRICE,
    free_port,
    make_run,
    start_uvicorn,
)
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
WORST = worst_case_micros(Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT), BODY)
COST = PROMPT_TOKENS * 1 + 5 * 2  # the fake's usage at the fake model's prices


def _post(url: str, key: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{url}/chat/completions", json=BODY, headers=headers, timeout=30)


@pytest.fixture
def slow_settling(transactional_db, upstream, tmp_path):
    """The router under uvicorn, holding answered calls' settlements for 60 s; (URL, process)."""
    from django.db import connection

    port = free_port()
    process = start_uvicorn(
        upstream_base=upstream.base_url,
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / "uvicorn.log",
        BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS="60",
    )
    yield f"http://127.0.0.1:{port}/api/v1", process
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=20)


def test_a_call_refused_for_its_cap_while_its_runs_calls_wait_to_settle_gets_them_settled(
    owner, harness, covered_model, slow_settling
):
    url, _ = slow_settling
    # Room for a second call only once the first has given back its reservation.
    run = make_run(owner.project, harness, cap_micros=WORST + COST)

    first = _post(url, run.plain_key)
    run.refresh_from_db()
    assert first.status_code == 200
    assert (run.covered_reserved_micros, Span.objects.filter(run=run).count()) == (WORST, 0)

    second = _post(url, run.plain_key)

    assert second.status_code == 200, second.text
    run.refresh_from_db()
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, WORST)
    third = _post(url, run.plain_key)  # settled too, and still no room: refused
    assert third.status_code == 402
    run.refresh_from_db()
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (2 * COST, 0)


def test_the_servers_shutdown_writes_the_settlements_still_pending(covered_run, slow_settling):
    url, process = slow_settling
    assert _post(url, covered_run.plain_key).status_code == 200
    covered_run.refresh_from_db()
    assert covered_run.covered_reserved_micros == WORST  # not settled yet (60 s batches)

    process.terminate()  # SIGTERM: uvicorn's graceful shutdown, then the ASGI lifespan's
    process.wait(timeout=30)  # (uvicorn re-raises the SIGTERM once it has shut down)

    covered_run.refresh_from_db()
    assert (covered_run.covered_spent_micros, covered_run.covered_reserved_micros) == (COST, 0)
    assert Span.objects.get(run=covered_run).output_tokens == 5


def _call(text: str, cost: int) -> CallRecord:
    return CallRecord(
        model=MODEL, messages=[{"role": "user", "content": text}], started_ns=1, cost_micros=cost
    )


def test_a_failing_batch_is_written_call_by_call_and_a_span_that_cannot_be_stored_is_dropped_not_the_money(
    covered_run, monkeypatch, owner
):
    monkeypatch.setattr(settlement, "RETRY_SECONDS", 0.01)
    Run.objects.filter(pk=covered_run.pk).update(covered_reserved_micros=300)
    good = Settlement(covered_run.ingest_key, covered_run.pk, _call("fine", 7), 100)
    poisoned = _call("bad", 11)
    poisoned.messages = [{"content": object()}]  # its span cannot be written (not JSON)
    bad = Settlement(covered_run.ingest_key, covered_run.pk, poisoned, 200)

    async def settle_both():
        settler = settlement.Settler()
        await asyncio.gather(settler.settle(good), settler.settle(bad))

    aio.run(settle_both())

    covered_run.refresh_from_db()
    assert (covered_run.covered_spent_micros, covered_run.covered_reserved_micros) == (18, 0)
    (span,) = Span.objects.filter(run=covered_run)
    assert span.input_messages == [{"role": "user", "content": "fine"}]
    # The run's trace is short of the poisoned call: its API and page say so.
    assert covered_run.traces_incomplete
    assert owner.api.get(f"/api/v1/runs/{covered_run.pk}").json()["traces_incomplete"] is True
    assert (
        'id="run-traces-incomplete"' in owner.web.get(f"/runs/{covered_run.pk}/").content.decode()
    )
