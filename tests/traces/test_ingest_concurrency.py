"""POST /api/v1/traces concurrently: real transactions, one connection per request."""

import json
import threading

import pytest

from tests.traces.helpers import (
    JSON,
    body_of,
    fixture_bytes,
    llm_attributes,
    post_outcome,
    post_traces,
    span,
)
from traces import ingest_views
from traces.models import Session, Span

pytestmark = pytest.mark.django_db


# --- concurrency (real transactions, one connection per request) ----------------------------------


def post_concurrently(bodies: list[tuple[str, bytes]]) -> list[int]:
    """POST each (key, body) from its own thread at once; their status codes."""
    from django.db import connection

    statuses: list[int] = [0] * len(bodies)
    start = threading.Barrier(len(bodies))

    def send(i: int, key: str, body: bytes) -> None:
        try:
            start.wait()
            statuses[i] = post_traces(key, body).status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i, *kb)) for i, kb in enumerate(bodies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return statuses


@pytest.mark.django_db(transaction=True)
def test_the_same_batch_sent_four_times_at_once_is_stored_and_counted_once(owner):
    body = fixture_bytes("sdk_batch.json")

    assert post_concurrently([(owner.key, body)] * 4) == [200] * 4

    assert Span.objects.count() == 8
    session = Session.objects.get(external_id="run_capture_1")
    assert (session.span_count, session.llm_call_count) == (8, 4)
    assert (session.input_tokens, session.output_tokens) == (62, 6)


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_of_one_session_lose_no_counts(owner):
    bodies = [
        json.dumps(
            body_of(*(span(f"b{b}s{i}", attributes=llm_attributes("busy")) for i in range(25)))
        ).encode()
        for b in range(4)
    ]

    assert post_concurrently([(owner.key, body) for body in bodies]) == [200] * 4

    session = Session.objects.get(external_id="busy")
    assert session.span_count == 100 == Span.objects.filter(session=session).count()
    assert (session.llm_call_count, session.input_tokens, session.output_tokens) == (100, 1200, 300)


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_over_the_same_sessions_in_any_order_neither_deadlock_nor_miscount(
    owner,
):
    names = ["s-a", "s-b", "s-c", "s-d"]
    bodies = []
    for b in range(6):  # each batch touches every session, in its own order
        order = names[b % 4 :] + names[: b % 4]
        order = order[::-1] if b % 2 else order
        spans = [
            span(f"b{b}{name}{i}", attributes=llm_attributes(name, model=f"m{b}"), start=b)
            for name in order
            for i in range(5)
        ]
        bodies.append((owner.key, json.dumps(body_of(*spans)).encode()))

    assert post_concurrently(bodies + bodies[:2]) == [200] * 8  # two of them sent twice

    for session in Session.objects.filter(external_id__in=names):
        assert session.span_count == 30 == Span.objects.filter(session=session).count()
        assert (session.llm_call_count, session.input_tokens) == (30, 360)
        assert session.model == "m5"  # the latest call's, whichever batch committed last


def test_a_nul_inside_llm_message_json_is_stored_as_a_replacement_character(owner):
    messages = '[{"role": "user", "parts": [{"type": "text", "content": "a\\u0000b"}]}]'
    document = body_of(
        span(
            "openai.chat", attributes={"session.id": "nul-test", "gen_ai.input.messages": messages}
        )
    )
    response = post_traces(owner.key, document)
    assert response.status_code == 200, response.content
    stored = Span.objects.get(session__external_id="nul-test")
    assert stored.input_messages == [{"role": "user", "content": "a\ufffdb"}]


def test_a_client_that_goes_away_mid_body_gets_a_400_not_a_500(owner, rf):
    from django.http import UnreadablePostError

    class Broken:
        def read(self, *args):
            raise UnreadablePostError("connection reset")

    for view, ctype in [(ingest_views.traces, JSON), (ingest_views.outcomes, JSON)]:
        request = rf.post(
            "/api/v1/traces",
            data=b"{}",
            content_type=ctype,
            HTTP_AUTHORIZATION=f"Bearer {owner.key}",
        )
        request._stream = Broken()
        request.read = Broken().read
        assert view(request).status_code == 400


def test_a_run_key_cannot_report_the_outcome_of_another_runs_session(owner, running_run):
    from runs.models import Run as RunModel
    from traces.models import Session as SessionModel

    run_key = running_run.key
    other = RunModel.objects.create(project=owner.project, harness_name="other", status="running")
    SessionModel.objects.create(project=owner.project, external_id=other.pk, run=other)
    response = post_outcome(run_key, {"session_id": other.pk, "outcome": "fail"})
    assert response.status_code == 404
    assert SessionModel.objects.get(external_id=other.pk).outcome == ""
    # The project key may.
    assert post_outcome(owner.key, {"session_id": other.pk, "outcome": "fail"}).status_code == 200
