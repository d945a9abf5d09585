"""One covered call seen by a client's SDK span and by the router's span counts once, with the
router's tokens: paired by trace context (the `traceparent` the client sent the router) or,
without it, by run session, model, token counts and time. Spans uploaded as OTLP/JSON with
the run's key (no SDK here: tests/router/test_traced_covered_run_e2e.py runs the real one);
the router's spans recorded by its own settling path."""

import time

import pytest

from router.services import CallRecord, Settlement, calls_settle
from tests.router.helpers import MODEL, make_run
from tests.traces.helpers import (
    body_of,
    llm_attributes,
    new_span_id,
    new_trace_id,
    post_traces,
    span,
)
from traces.models import Session, Span

pytestmark = pytest.mark.django_db(transaction=True)  # calls_settle closes old connections
JUDGE = "fakelab/judge"


def _router_call(run, *, model=MODEL, tokens=(11, 5), trace_parent=None, at_ns=None) -> Span:
    """One call as the router records it (router.services.calls_settle); its span."""
    started = at_ns or time.time_ns()
    call = CallRecord(model=model, messages=[], started_ns=started, ended_ns=started + 50_000_000)
    call.input_tokens, call.output_tokens, call.cost_micros = *tokens, 21
    call.trace_parent = trace_parent
    before = set(
        Span.objects.filter(run=run, attributes__has_key="belvedir.router.cost_micros").values_list(
            "pk", flat=True
        )
    )
    calls_settle([Settlement(run.ingest_key, run.pk, call)])
    return (
        Span.objects.filter(run=run, attributes__has_key="belvedir.router.cost_micros")
        .exclude(pk__in=before)
        .get()
    )


def _client_call(run, *, model=MODEL, tokens=(11, 5), trace_id=None, span_id=None, at_ns=None):
    """The SDK's span of one call (opentelemetry-instrumentation-openai's attributes), sent
    with the run's key into the run's session, starting just before the router's; its
    (trace id, span id)."""
    attributes = llm_attributes(run.pk, model)
    attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = tokens
    sent = span("openai.chat", trace_id=trace_id, span_id=span_id, attributes=attributes, kind=3)
    started = (at_ns or time.time_ns()) - 10_000_000
    sent["startTimeUnixNano"], sent["endTimeUnixNano"] = str(started), str(started + 90_000_000)
    assert post_traces(run.plain_key, body_of(sent)).status_code == 200
    return sent["traceId"], sent["spanId"]


@pytest.fixture
def run(owner, harness):
    return make_run(owner.project, harness, cap_micros=2_000_000, judge_model=JUDGE)


def _session(run) -> Session:
    return Session.objects.get(project=run.project, external_id=run.pk)


@pytest.mark.parametrize("router_first", [True, False], ids=["router first", "client first"])
def test_a_call_the_client_traced_with_trace_context_counts_once_with_the_routers_tokens(
    run, router_first
):
    trace_id, span_id = new_trace_id(), new_span_id()
    # The client's instrumentation read other token counts than the router metered.
    if router_first:
        router = _router_call(run, trace_parent=(trace_id, span_id), tokens=(11, 5))
        _client_call(run, trace_id=trace_id, span_id=span_id, tokens=(12, 3))
    else:
        _client_call(run, trace_id=trace_id, span_id=span_id, tokens=(12, 3))
        router = _router_call(run, trace_parent=(trace_id, span_id), tokens=(11, 5))

    session = _session(run)
    assert (session.llm_call_count, session.input_tokens, session.output_tokens) == (1, 11, 5)
    client = Span.objects.get(session=session, span_id=span_id)
    assert client.duplicate_of_id == router.pk and router.duplicate_of_id is None
    # Linked in the tree: the router's span continues the client's trace, under its span.
    assert (router.trace_id, router.parent_span_id) == (trace_id, span_id)
    assert session.span_count == 2  # both kept


@pytest.mark.parametrize("router_first", [True, False], ids=["router first", "client first"])
def test_a_call_traced_without_trace_context_pairs_by_model_tokens_and_time(run, router_first):
    now = time.time_ns()
    if router_first:
        router = _router_call(run, at_ns=now)
        _client_call(run, at_ns=now)
    else:
        _client_call(run, at_ns=now)
        router = _router_call(run, at_ns=now)
    # Another call, not through the router (its own tokens): counted on its own.
    _client_call(run, model="someone/else", tokens=(40, 2), at_ns=now)

    session = _session(run)
    assert (session.llm_call_count, session.input_tokens, session.output_tokens) == (2, 51, 7)
    assert Span.objects.filter(session=session, duplicate_of=router).count() == 1


def test_two_alike_calls_pair_one_to_one(run):
    now = time.time_ns()
    _router_call(run, at_ns=now)
    _router_call(run, at_ns=now + 1_000_000)
    _client_call(run, at_ns=now)
    _client_call(run, at_ns=now + 1_000_000)
    _client_call(run, at_ns=now + 2_000_000)  # a third alike, which the router never saw

    session = _session(run)
    assert (session.llm_call_count, session.input_tokens) == (3, 33)
    paired = Span.objects.filter(session=session, duplicate_of__isnull=False)
    assert len({s.duplicate_of_id for s in paired}) == paired.count() == 2


def test_alike_calls_in_one_client_batch_each_pair_with_a_router_span_of_their_own(run):
    # A client that sends no trace context and flushes calls alike (same model, same token
    # counts: a judge asked three times) in one batch, after the router recorded them. Each
    # nearest router span is the same one for the three; they must still pair one to one
    # (the Runner's 18 calls counted 21 before: three calls of a batch found no twin).
    now = time.time_ns()
    routers = [_router_call(run, at_ns=now + n * 1_000_000) for n in range(3)]
    sent = []
    for n in range(3):
        attributes = llm_attributes(run.pk, MODEL)
        attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"] = 11, 5
        one = span("openai.chat", attributes=attributes, kind=3)
        started = now + n * 1_000_000 - 10_000_000
        one["startTimeUnixNano"], one["endTimeUnixNano"] = str(started), str(started + 90_000_000)
        sent.append(one)
    assert post_traces(run.plain_key, body_of(*sent)).status_code == 200

    session = _session(run)
    assert (session.llm_call_count, session.input_tokens, session.output_tokens) == (3, 33, 15)
    clients = Span.objects.filter(session=session, from_router=False, is_llm=True)
    assert sorted(s.duplicate_of_id for s in clients) == sorted(r.pk for r in routers)


def test_alike_calls_the_router_settles_in_one_batch_each_pair_with_a_client_span_of_their_own(
    run,
):
    # The client flushed first; the router settles calls in batches (router/settlement.py),
    # three alike (same model and token counts) in one: each must find its own client span
    # (make up's Runner card counted 24 calls for 18 before).
    now = time.time_ns()
    clients = [_client_call(run, at_ns=now + n * 1_000_000) for n in range(3)]
    settlements = []
    for n in range(3):
        started = now + n * 1_000_000
        call = CallRecord(
            model=MODEL, messages=[], started_ns=started, ended_ns=started + 50_000_000
        )
        call.input_tokens, call.output_tokens, call.cost_micros = 11, 5, 21
        settlements.append(Settlement(run.ingest_key, run.pk, call))
    calls_settle(settlements)

    session = _session(run)
    assert (session.llm_call_count, session.input_tokens, session.output_tokens) == (3, 33, 15)
    routers = Span.objects.filter(session=session, from_router=True)
    paired = Span.objects.filter(session=session, span_id__in=[s for _, s in clients])
    assert sorted(s.duplicate_of_id for s in paired) == sorted(r.pk for r in routers)


def test_a_client_span_far_from_any_router_call_is_not_paired(run):
    now = time.time_ns()
    _router_call(run, at_ns=now)
    _client_call(run, at_ns=now + 120 * 10**9)

    assert _session(run).llm_call_count == 2


def test_a_trace_context_naming_another_runs_span_pairs_nothing(owner, harness, run):
    other = make_run(owner.project, harness, cap_micros=2_000_000)
    trace_id, span_id = _client_call(other)
    _router_call(run, trace_parent=(trace_id, span_id))

    assert Span.objects.get(span_id=span_id).duplicate_of_id is None
    assert _session(other).llm_call_count == 1
    assert _session(run).llm_call_count == 1


def test_a_runs_session_shows_the_model_under_test_though_its_judge_was_called_last(owner, run):
    now = time.time_ns()
    trace_id, span_id = _client_call(run, at_ns=now)
    _router_call(run, trace_parent=(trace_id, span_id), at_ns=now)
    trace_id, span_id = _client_call(run, model=JUDGE, at_ns=now + 10**9)
    _router_call(run, model=JUDGE, trace_parent=(trace_id, span_id), at_ns=now + 10**9)

    session = _session(run)
    assert session.model == MODEL
    page = owner.web.get(f"/traces/?run={run.pk}").content.decode()
    assert f"<td>{MODEL}</td>" in page and f"<td>{JUDGE}</td>" not in page

    answer = owner.api.get(f"/api/v1/sessions/{session.pk}").json()
    assert answer["model"] == MODEL
    assert (answer["llm_call_count"], answer["total_tokens"]) == (2, 32)
    assert [c["model"] for c in answer["llm_calls"]] == [MODEL, JUDGE]
    assert sum(s["duplicate"] for s in answer["spans"]) == 2
    assert sum(s["from_router"] for s in answer["spans"]) == 2
