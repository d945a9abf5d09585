"""Values stored exactly through the one-statement path: text that JSON and COPY give a
meaning to (backslashes, separators, the NULL marker), text outside ASCII, huge values, and
the columns a span without an LLM call leaves empty. Through the real endpoint.
"""

import json

import pytest

from tests.traces.helpers import (
    JSON,
    body_of,
    llm_attributes,
    post_traces,
    span,
)
from traces import otlp
from traces.models import Span
from traces.services import ingest as ingest_service

pytestmark = pytest.mark.django_db

# What JSON or PostgreSQL's COPY text format give a meaning to (backslash escapes, quotes,
# the column and row separators, the NULL marker, the end-of-data line), and non-ASCII.
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


@pytest.mark.parametrize("text", TRICKY)
def test_text_with_a_meaning_in_json_or_copy_is_stored_exactly(owner, text):
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
