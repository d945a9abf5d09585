"""The COPY path of ingest: text COPY must escape, the stage table between batches, a refused
value. Batches go through the real endpoint unless the case cannot be sent over HTTP.
"""

import json

import pytest
from django.db import DataError, connection

from belvedir.services import api_key_authenticate
from tests.traces.helpers import (
    JSON,
    body_of,
    llm_attributes,
    post_traces,
    span,
)
from traces import otlp
from traces.models import Session, Span
from traces.services import ingest as ingest_service

pytestmark = pytest.mark.django_db

# What COPY's text format gives a meaning to (backslash escapes, the column and row
# separators, the NULL marker, the end-of-data line), and text outside ASCII.
TRICKY = [
    "back\\slash",
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "\\N",
    "\\.",
    "\\.\n",
    'quote " and \\"escaped\\"',
    "emoji 😀 and ünïcödé and 中文",
    "\u202eright-to-left",
    "",
]


def stage_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {ingest_service._STAGE_TABLE}")
        return cursor.fetchone()[0]


@pytest.mark.parametrize("text", TRICKY)
def test_text_copy_gives_a_meaning_to_is_stored_exactly(owner, text):
    messages = [{"role": "user", "parts": [{"type": "text", "content": text}]}]
    attributes = {
        **llm_attributes("copy"),
        "gen_ai.input.messages": json.dumps(messages),
        "plain": text,
        f"key {text}": [text, 1, 2.5, True],
    }
    doc = body_of(span(f"name {text}", attributes=attributes), resource={"service.name": text})
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["status"] = {
        "code": 2,
        "message": text,
    }

    response = post_traces(owner.key, doc)

    assert response.status_code == 200, response.content
    stored = Span.objects.get()
    assert stored.name == f"name {text}"
    assert stored.status_message == text
    assert stored.attributes["plain"] == text
    assert stored.attributes[f"key {text}"] == [text, 1, 2.5, True]
    assert stored.resource["service.name"] == text
    assert stored.input_messages[-1]["content"] == text
    assert stored.parent_span_id == ""
    assert stored.input_tokens is not None and stored.is_llm


def test_a_huge_attribute_is_stored_as_decoded(owner):
    huge = "x\\y\t😀" * 100_000  # 500,000 characters: past the value limit, so truncated
    doc = body_of(span("huge", attributes={"session.id": "huge", "big": huge}))
    body = json.dumps(doc).encode()
    decoded = otlp.decode_request(body, JSON).spans[0].attributes["big"]

    response = post_traces(owner.key, body)

    assert response.status_code == 200, response.content
    assert Span.objects.get().attributes["big"] == decoded
    assert len(decoded) > 1000


def test_spans_without_a_session_attribute_or_llm_call_store_their_empty_columns(owner):
    response = post_traces(owner.key, body_of(span("plain")))

    assert response.status_code == 200, response.content
    stored = Span.objects.get()
    assert (stored.is_llm, stored.model, stored.input_messages, stored.output_messages) == (
        False,
        "",
        [],
        [],
    )
    assert stored.input_tokens is None and stored.run_id is None
    assert stored.session.external_id == f"{ingest_service.TRACE_SESSION_PREFIX}{stored.trace_id}"


@pytest.mark.django_db(transaction=True)
def test_the_stage_is_empty_after_each_batch_and_a_retry_counts_once(owner):
    first = body_of(*(span(f"s{i}", attributes={"session.id": "one"}) for i in range(3)))
    second = body_of(*(span(f"t{i}", attributes={"session.id": "one"}) for i in range(2)))

    assert post_traces(owner.key, first).status_code == 200
    assert stage_rows() == 0  # emptied at commit: the next batch cannot insert these again
    assert post_traces(owner.key, second).status_code == 200
    assert post_traces(owner.key, first).status_code == 200  # a retried batch

    assert Span.objects.count() == 5
    assert Session.objects.get().span_count == 5
    assert stage_rows() == 0


@pytest.mark.django_db(transaction=True)
def test_a_value_postgresql_refuses_fails_as_a_database_error_and_leaves_nothing(owner):
    bad = otlp.decode_request(json.dumps(body_of(span("bad"))).encode(), JSON).spans[0]
    bad.name = "lone \ud800 surrogate"  # the decoders never let one through: sent directly

    with pytest.raises(DataError):
        ingest_service.spans_ingest(key=api_key_authenticate(owner.key), spans=[bad])

    assert (Span.objects.count(), Session.objects.count()) == (0, 0)
    # The same connection stores the next batch, its own spans only.
    good = body_of(span("good", attributes={"session.id": "after"}))
    assert post_traces(owner.key, good).status_code == 200
    assert list(Span.objects.values_list("name", flat=True)) == ["good"]
    assert Session.objects.get(external_id="after").span_count == 1
    assert stage_rows() == 0
