"""Hostile input against the real endpoint: never a 5xx, and a refused batch writes nothing.

Property tests (hypothesis) post malformed JSON, random JSON structures, random and corrupted
protobuf, wrong types, huge and deeply nested values, bad ids and duplicate spans through the
Django test client to POST /api/v1/traces on PostgreSQL, and check after each request:

* the status is never 5xx (the database is up and no slot is taken, so not even a 503);
* a 400/413/415 leaves the Span and Session tables exactly as they were;
* a 200 answers in the request's encoding, and rejects at most the spans that were sent.
"""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.traces.fuzz import (
    FUZZ,
    check,
    counts,
    documents,
    encode,
    hostile_documents,
    leaves,
    plain_json,
    spans_in,
)
from tests.traces.helpers import (
    JSON,
    PROTOBUF,
    fixture_bytes,
    fixture_doc,
    post_outcome,
    post_traces,
    to_protobuf,
)

pytestmark = pytest.mark.django_db


# --- properties -----------------------------------------------------------------------------------


@FUZZ
@given(document=documents, gzipped=st.booleans())
def test_random_otlp_shaped_json_is_stored_or_refused_never_a_5xx(owner, document, gzipped):
    before = counts()
    response = post_traces(owner.key, encode(document), JSON, gzipped=gzipped)
    check(response, before, JSON, sent=spans_in(document))


@FUZZ
@given(document=hostile_documents, gzipped=st.booleans())
def test_spans_with_hostile_values_are_stored_or_rejected_never_a_5xx(owner, document, gzipped):
    before = counts()
    response = post_traces(owner.key, encode(document), JSON, gzipped=gzipped)
    check(response, before, JSON, sent=spans_in(document))


@FUZZ
@given(document=hostile_documents | documents)
def test_the_same_documents_as_protobuf_are_stored_or_refused_never_a_5xx(owner, document):
    try:
        body = to_protobuf(json.loads(encode(document)))
    except Exception:  # not expressible as protobuf; the JSON test covers it
        body = encode(document)[:200]
    before = counts()
    response = post_traces(owner.key, body, PROTOBUF)
    check(response, before, PROTOBUF)


@FUZZ
@given(
    document=plain_json,
    content_type=st.sampled_from(
        [JSON, PROTOBUF, "text/plain", "application/json; charset=latin-1"]
    ),
)
def test_random_json_structures_are_never_a_5xx(owner, document, content_type):
    before = counts()
    response = post_traces(owner.key, encode(document), content_type)
    check(response, before, PROTOBUF if content_type == PROTOBUF else JSON)


SDK_BODY = fixture_bytes("sdk_batch.json")
SDK_PROTO = to_protobuf(fixture_doc("sdk_batch.json"))


@FUZZ
@given(
    source=st.sampled_from(["json", "protobuf"]),
    cut=st.integers(0, len(SDK_BODY)),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=6),
    gzipped=st.booleans(),
)
def test_truncated_or_corrupted_sdk_bodies_are_never_a_5xx(owner, source, cut, flips, gzipped):
    body = bytearray(SDK_BODY if source == "json" else SDK_PROTO)
    for position, byte in flips:
        body[position % len(body)] = byte
    body = bytes(body[: cut if source == "json" else cut % (len(body) + 1)])
    content_type = JSON if source == "json" else PROTOBUF
    before = counts()
    response = post_traces(owner.key, body, content_type, gzipped=gzipped)
    check(response, before, content_type)


@FUZZ
@given(
    body=st.binary(max_size=2000),
    content_type=st.sampled_from([JSON, PROTOBUF, "application/protobuf", "", "text/html"]),
    encoding=st.sampled_from([None, "gzip", "deflate", "identity", "br", "GZIP"]),
)
def test_random_bytes_are_never_a_5xx(owner, body, content_type, encoding):
    headers = {"HTTP_CONTENT_ENCODING": encoding} if encoding else {}
    before = counts()
    response = post_traces(owner.key, body, content_type, **headers)
    check(
        response, before, PROTOBUF if content_type in (PROTOBUF, "application/protobuf") else JSON
    )


@FUZZ
@given(
    body=st.one_of(
        plain_json.map(lambda d: json.dumps(d).encode()),
        st.binary(max_size=200),
        st.fixed_dictionaries(
            {
                "session_id": leaves | plain_json,
                "outcome": st.sampled_from(["success", "fail", "maybe"]) | leaves,
            }
        ).map(lambda d: json.dumps(d).encode()),
    )
)
def test_random_outcomes_are_never_a_5xx(owner, body):
    response = post_outcome(owner.key, None, raw=body)
    assert response.status_code in (200, 400, 404, 413), (response.status_code, body[:200])
