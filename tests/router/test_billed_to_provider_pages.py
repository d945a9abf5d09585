"""Own-key calls on the pages: the run page says its calls went through the router with the
user's key (or, with BELVEDIR_MODEL_PROXY=off, that the sandbox had the key itself), and the
run's traces part and its session page show their tokens and estimated cost as "billed to your
provider", not charged to the organization."""

import time

import pytest

from billing.pricing import Price
from router.services import Admission, CallRecord, Settlement, calls_settle
from router.targets import Target
from tests.router.helpers import MODEL, make_run
from traces.models import Session

pytestmark = pytest.mark.django_db(transaction=True)  # calls_settle closes old connections

# $1 and $2 a million tokens: 1 and 2 micro-dollars a token.
PRICE = Price(1_000_000, 2_000_000, 100)


def _own_call(run, *, price, tokens):
    started = time.time_ns()
    call = CallRecord(model=MODEL, messages=[], started_ns=started, ended_ns=started + 10**6)
    call.input_tokens, call.output_tokens = tokens
    target = Target(base="https://provider.example/v1", key="sk-own", covered=False)
    admission = Admission(run.ingest_key, run.pk, price, 0, target=target)
    calls_settle([Settlement.of(admission, call)])


def test_the_run_and_its_session_show_what_the_users_provider_bills(owner, harness):
    run = make_run(
        owner.project,
        harness,
        cap_micros=0,
        covered=False,
        model_proxied=True,
        model_api_base_resolved="https://provider.example/v1",
    )
    _own_call(run, price=PRICE, tokens=(11, 5))  # 11 + 10 micro-dollars
    _own_call(run, price=None, tokens=(7, 9))  # a model the catalog does not price

    summary = owner.web.get(
        f"/traces/?run={run.pk}&fragment=run-summary", HTTP_HX_REQUEST="true"
    ).content.decode()
    session = Session.objects.get(run=run)
    page = owner.web.get(f"/traces/sessions/{session.pk}/").content.decode()
    run_page = owner.web.get(f"/runs/{run.pk}/").content.decode()

    for shown in (summary, page):
        assert "Billed to your provider: 2 calls with your own key · 32 tokens" in shown
        assert "about $0.000021" in shown and "for 1 of the calls" in shown
        assert "Not charged to your organization." in shown
    assert "called through the Belvedir router with your key" in run_page
    assert "Covered spend" not in run_page
    run.refresh_from_db()
    assert run.covered_spent_micros == 0


def test_a_run_without_own_key_calls_shows_no_provider_line(owner, harness):
    run = make_run(owner.project, harness, cap_micros=10**6)
    started = time.time_ns()
    call = CallRecord(model=MODEL, messages=[], started_ns=started, ended_ns=started + 10**6)
    call.input_tokens, call.output_tokens = 3, 4
    calls_settle([Settlement(run.ingest_key, run.pk, call, 0)])

    summary = owner.web.get(
        f"/traces/?run={run.pk}&fragment=run-summary", HTTP_HX_REQUEST="true"
    ).content.decode()

    assert "Traces:" in summary and "Billed to your provider" not in summary


def test_with_the_proxy_off_the_run_page_says_the_sandbox_had_the_key(owner, harness):
    run = make_run(
        owner.project,
        harness,
        cap_micros=0,
        covered=False,
        model_api_base_resolved="https://provider.example/v1",
        harness_snapshot={"env": {"BELVEDIR_MODEL_PROXY": "off"}},
    )

    run_page = owner.web.get(f"/runs/{run.pk}/").content.decode()

    assert "BELVEDIR_MODEL_PROXY=off: the sandbox was given this base and your key" in run_page
    assert "through the Belvedir router" not in run_page
