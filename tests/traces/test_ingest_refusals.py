"""POST /api/v1/traces refusals (nothing written, answered in the request's content type),
keys and overload.
"""

import gzip
import json
import threading

import pytest
from django.db import OperationalError

from belvedir.services import api_key_create, api_key_revoke
from runs.services import run_finish
from tests.traces.helpers import (
    JSON,
    MB,
    PROTOBUF,
    body_of,
    fixture_bytes,
    fixture_doc,
    json_of,
    new_trace_id,
    post_outcome,
    post_traces,
    rpc_status_of,
    span,
    stored,
    to_protobuf,
)
from traces import ingest_views
from traces.models import Session, Span

pytestmark = pytest.mark.django_db


# --- refusals: nothing written, answered in the request's content type ------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b'{"resourceSpans": 5}',
        b'{"resourceSpans": [{"scopeSpans": "x"}]}',
        b"\xff\xfe",
    ],
    ids=["malformed", "array", "wrong-type", "nested-wrong-type", "not-utf8"],
)
def test_an_undecodable_json_body_is_a_400_json_status(owner, body):
    response = post_traces(owner.key, body)

    assert response.status_code == 400
    error = json_of(response)
    assert error["code"] == 3 and "cannot be decoded" in error["message"]
    assert stored() == (0, 0)


def test_an_undecodable_protobuf_body_is_a_400_protobuf_status(owner):
    response = post_traces(owner.key, b"\x0a\xff\xff\xff\xff\x0f garbage", PROTOBUF)

    assert response.status_code == 400
    status = rpc_status_of(response)
    assert status.code == 3 and "cannot be decoded" in status.message
    assert stored() == (0, 0)


def test_a_corrupt_gzip_body_is_a_400(owner):
    data = gzip.compress(fixture_bytes("sdk_batch.json"))[:-20]
    response = post_traces(owner.key, data, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 400
    assert stored() == (0, 0)


@pytest.mark.parametrize("content_type", [JSON, PROTOBUF])
def test_1001_spans_are_a_413_and_none_is_stored_but_1000_are_fine(owner, content_type):
    trace_id = new_trace_id()
    spans = [
        span(f"s{i}", trace_id=trace_id, attributes={"session.id": "many"}) for i in range(1001)
    ]

    def encode(document):
        return json.dumps(document).encode() if content_type == JSON else to_protobuf(document)

    response = post_traces(owner.key, encode(body_of(*spans)), content_type)

    assert response.status_code == 413
    assert response["Content-Type"] == content_type
    assert stored() == (0, 0)

    response = post_traces(owner.key, encode(body_of(*spans[:1000])), content_type)
    assert response.status_code == 200
    assert Session.objects.get(external_id="many").span_count == 1000


def test_a_body_over_5_mb_is_a_413_before_anything_is_decoded(owner):
    body = b"{" + b" " * (5 * MB) + b"}"

    response = post_traces(owner.key, body)

    assert response.status_code == 413
    assert "over 5242880 bytes" in json_of(response)["message"]
    assert stored() == (0, 0)


def test_a_gzipped_body_over_5_mb_on_the_wire_is_a_413(owner):
    import os

    noise = os.urandom(5 * MB + 10)  # incompressible: the gzip stays over 5 MB
    response = post_traces(owner.key, noise, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert stored() == (0, 0)


@pytest.mark.parametrize("content_type", [JSON, PROTOBUF])
def test_a_small_gzip_that_inflates_past_5_mb_is_a_413(owner, content_type):
    filler = "y" * (6 * MB)
    document = body_of(span("inflated", attributes={"session.id": "bomb", "filler": filler}))
    body = json.dumps(document).encode() if content_type == JSON else to_protobuf(document)
    squeezed = gzip.compress(body)
    assert len(squeezed) < 100_000

    response = post_traces(owner.key, squeezed, content_type, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert response["Content-Type"] == content_type
    assert "after decompression" in (
        json_of(response)["message"] if content_type == JSON else rpc_status_of(response).message
    )
    assert stored() == (0, 0)


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "multipart/form-data; boundary=x", ""]
)
def test_another_content_type_is_a_415(owner, content_type):
    response = post_traces(owner.key, fixture_bytes("sdk_batch.json"), content_type)

    assert response.status_code == 415
    assert "application/x-protobuf" in json_of(response)["message"]
    assert stored() == (0, 0)


def test_an_unknown_content_encoding_is_a_415(owner):
    response = post_traces(owner.key, fixture_bytes("sdk_batch.json"), HTTP_CONTENT_ENCODING="br")

    assert response.status_code == 415
    assert stored() == (0, 0)


def test_only_post_is_allowed(owner):
    from django.test import Client

    response = Client().get("/api/v1/traces", HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    assert response.status_code == 405


# --- keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [None, "", "bv_live_not-a-real-key-at-all", "Basic dXNlcjpwYXNz"],
    ids=["none", "empty", "unknown", "basic"],
)
def test_a_missing_or_unknown_key_is_a_401(db, key):
    response = post_traces(key, fixture_bytes("sdk_batch.json"))

    assert response.status_code == 401
    assert "Unknown or revoked" in json_of(response)["message"]
    assert stored() == (0, 0)


def test_a_401_to_a_protobuf_exporter_is_protobuf(db):
    response = post_traces("bv_live_nope", to_protobuf(fixture_doc("sdk_batch.json")), PROTOBUF)

    assert response.status_code == 401
    assert rpc_status_of(response).code == 16


def test_a_revoked_project_key_is_a_401(owner):
    key, plaintext = api_key_create(project=owner.project, name="to revoke")
    assert post_traces(plaintext, fixture_bytes("sdk_batch.json")).status_code == 200
    api_key_revoke(key=key)

    response = post_traces(plaintext, fixture_bytes("sdk_import_batch.json"))

    assert response.status_code == 401
    assert not Session.objects.filter(external_id="conv-42").exists()


def test_a_run_key_is_a_401_once_its_run_has_ended(running_run):
    assert post_traces(running_run.key, body_of(span("before"))).status_code == 200

    assert run_finish(run_id=running_run.pk, status="succeeded", score=1.0)

    assert post_traces(running_run.key, body_of(span("after"))).status_code == 401
    assert (
        post_outcome(running_run.key, {"session_id": running_run.pk, "outcome": "fail"}).status_code
        == 401
    )
    assert list(Span.objects.values_list("name", flat=True)) == ["before"]


# --- overload ------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [JSON, PROTOBUF])
def test_ingest_answers_503_with_retry_after_while_every_slot_is_taken(
    owner, monkeypatch, content_type
):
    slots = threading.BoundedSemaphore(2)
    monkeypatch.setattr(ingest_views, "_in_flight", slots)
    document = fixture_doc("sdk_batch.json")
    body = json.dumps(document).encode() if content_type == JSON else to_protobuf(document)
    slots.acquire()
    slots.acquire()  # two requests in flight

    response = post_traces(owner.key, body, content_type)

    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response["Content-Type"] == content_type
    assert stored() == (0, 0)

    slots.release()  # one of them finished: the slot is used and handed back each time
    for _ in range(3):
        assert post_traces(owner.key, body, content_type).status_code == 200
    assert Span.objects.count() == 8


def test_a_database_outage_is_a_503_with_retry_after_not_a_500(owner, monkeypatch):
    def down(**kwargs):
        raise OperationalError("the database is restarting")

    monkeypatch.setattr(ingest_views, "spans_ingest", down)

    response = post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    assert response.status_code == 503 and response["Retry-After"]
    assert post_traces(owner.key, b"{}").status_code == 503  # and the slot was given back
