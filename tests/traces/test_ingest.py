"""POST /api/v1/traces and /api/v1/outcomes through the real endpoint, on PostgreSQL.

Bodies are what the belvedir SDK 0.6.4 sent (tests/traces/fixtures), their protobuf twins,
and spans built here; see docs/sdk-wire-format.md.
"""

import gzip
import json
import threading

import pytest
from django.db import OperationalError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from belvedir.services import api_key_create, api_key_revoke
from runs.models import Run
from runs.services import run_finish
from tests.traces.conftest import (
    JSON,
    PROTOBUF,
    RpcStatus,
    body_of,
    fixture_bytes,
    fixture_doc,
    llm_attributes,
    new_span_id,
    new_trace_id,
    post_outcome,
    post_traces,
    proto_body,
    proto_span,
    span,
    to_protobuf,
)
from traces import ingest
from traces.models import Session, Span

pytestmark = pytest.mark.django_db

MB = 1024 * 1024


def stored() -> tuple[int, int]:
    return Span.objects.count(), Session.objects.count()


def json_of(response) -> dict:
    assert response["Content-Type"] == JSON, response["Content-Type"]
    return json.loads(response.content)


def rpc_status_of(response):
    assert response["Content-Type"] == PROTOBUF, response["Content-Type"]
    return RpcStatus.FromString(response.content)


# --- success, in both encodings -----------------------------------------------------------


def test_an_sdk_flush_is_stored_and_answered_with_an_empty_json_object(owner):
    response = post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    assert response.status_code == 200
    assert json_of(response) == {}
    session = Session.objects.get(project=owner.project, external_id="run_capture_1")
    assert session.span_count == 8 == Span.objects.filter(session=session).count()
    assert session.llm_call_count == 4
    assert (session.input_tokens, session.output_tokens) == (62, 6)
    assert session.run is None and session.outcome == ""
    chat = Span.objects.get(span_id="a8c856a54b5c6625")
    assert chat.trace_id == "530de291307fea47013dde9805dd505e"
    assert chat.parent_span_id == "31c2eb5c6ec05d35"
    assert (chat.kind, chat.scope_name) == ("client", "opentelemetry.instrumentation.openai.v1")
    assert chat.resource["service.name"] == "capture-agent"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    failing = Span.objects.get(name="failing task.workflow")
    assert (failing.status_code, failing.status_message) == ("error", "boom")
    assert failing.events[0]["name"] == "exception"
    assert failing.events[0]["attributes"]["exception.type"] == "ValueError"


def test_the_same_flush_as_protobuf_is_stored_alike_and_answered_in_protobuf(owner):
    response = post_traces(owner.key, to_protobuf(fixture_doc("sdk_batch.json")), PROTOBUF)

    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert not answer.HasField("partial_success")
    session = Session.objects.get(external_id="run_capture_1")
    assert (session.span_count, session.llm_call_count, session.input_tokens) == (8, 4, 62)
    assert Span.objects.get(span_id="a8c856a54b5c6625").model == "gpt-4o-mini-2024"


def test_a_protobuf_request_built_with_opentelemetry_proto_is_stored(owner):
    trace_id, root_id, call_id = new_trace_id(), new_span_id(), new_span_id()
    body = proto_body(
        proto_span(
            "agent.workflow",
            trace_id=trace_id,
            span_id=root_id,
            attributes={"session.id": "otel-1", "traceloop.span.kind": "workflow"},
        ),
        proto_span(
            "openai.chat",
            trace_id=trace_id,
            span_id=call_id,
            parent=root_id,
            attributes={
                "session.id": "otel-1",
                "gen_ai.request.model": "gpt-4.1",
                "gen_ai.usage.input_tokens": 40,
                "gen_ai.usage.output_tokens": 9,
                "gen_ai.request.temperature": 0.5,
                "gen_ai.is_streaming": False,
            },
        ),
    )

    response = post_traces(owner.key, body, PROTOBUF)

    assert response.status_code == 200, response.content
    assert ExportTraceServiceResponse.FromString(response.content) == ExportTraceServiceResponse()
    session = Session.objects.get(external_id="otel-1")
    assert session.model == "gpt-4.1"
    call = Span.objects.get(span_id=call_id)
    assert call.parent_span_id == root_id and call.session == session
    assert (call.is_llm, call.input_tokens, call.output_tokens, call.total_tokens) == (
        True,
        40,
        9,
        49,
    )
    assert call.attributes["gen_ai.request.temperature"] == 0.5
    assert call.resource["service.name"] == "otel-agent"
    assert Span.objects.get(span_id=root_id).span_kind == "workflow"


@pytest.mark.parametrize("content_type", [JSON, PROTOBUF])
def test_gzipped_bodies_are_stored_like_plain_ones(owner, content_type):
    document = fixture_doc("sdk_batch.json")
    body = json.dumps(document).encode() if content_type == JSON else to_protobuf(document)

    response = post_traces(owner.key, body, content_type, gzipped=True)

    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert Session.objects.get(external_id="run_capture_1").span_count == 8


def test_a_json_body_with_a_charset_is_json(owner):
    response = post_traces(owner.key, fixture_bytes("sdk_batch.json"), f"{JSON}; charset=utf-8")

    assert response.status_code == 200 and json_of(response) == {}


def test_a_body_past_djangos_upload_limit_but_under_5_mb_is_stored(owner):
    huge = "x" * 900_000
    spans = [span(f"big {i}", attributes={"session.id": "big", "payload": huge}) for i in range(4)]
    body = json.dumps(body_of(*spans)).encode()
    assert 3 * MB < len(body) < 5 * MB

    response = post_traces(owner.key, body)

    assert response.status_code == 200, response.content
    assert Session.objects.get(external_id="big").span_count == 4


def test_an_empty_request_is_a_success_that_stores_nothing(owner):
    for body, content_type in [(b"{}", JSON), (b"", PROTOBUF)]:
        response = post_traces(owner.key, body, content_type)
        assert response.status_code == 200
    assert stored() == (0, 0)


# --- idempotency ----------------------------------------------------------------------------


def test_the_same_batch_twice_stores_each_span_once_and_does_not_double_the_session(owner):
    for _ in range(2):
        assert post_traces(owner.key, fixture_bytes("sdk_batch.json")).status_code == 200
    # ... and a third time as protobuf, as a plain OTel exporter's retry might be.
    assert (
        post_traces(owner.key, to_protobuf(fixture_doc("sdk_batch.json")), PROTOBUF).status_code
        == 200
    )

    assert Span.objects.count() == 8
    session = Session.objects.get(external_id="run_capture_1")
    assert (session.span_count, session.llm_call_count) == (8, 4)
    assert (session.input_tokens, session.output_tokens) == (62, 6)


def test_a_batch_overlapping_an_earlier_one_adds_only_the_new_spans(owner):
    trace_id = new_trace_id()
    first = [
        span(f"s{i}", trace_id=trace_id, attributes=llm_attributes("overlap")) for i in range(3)
    ]
    second = [*first[1:], span("s3", trace_id=trace_id, attributes=llm_attributes("overlap"))]

    post_traces(owner.key, body_of(*first))
    post_traces(owner.key, body_of(*second))

    session = Session.objects.get(external_id="overlap")
    assert (session.span_count, session.llm_call_count, session.input_tokens) == (4, 4, 48)


def test_the_same_span_ids_in_two_projects_are_two_spans(owner, outsider):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    post_traces(outsider.key, fixture_bytes("sdk_batch.json"))

    assert Span.objects.filter(project=owner.project).count() == 8
    assert Span.objects.filter(project=outsider.project).count() == 8
    assert Session.objects.filter(external_id="run_capture_1").count() == 2


# --- partial success ----------------------------------------------------------------------


def test_bad_spans_are_rejected_by_count_and_reason_while_the_others_are_stored(owner):
    good = [span("good", attributes={"session.id": "partial"}) for _ in range(3)]
    bad_id = span("bad id", attributes={"session.id": "partial"}) | {"spanId": "not-hex"}
    reversed_times = span("reversed", attributes={"session.id": "partial"}) | {
        "startTimeUnixNano": "1796000000200000000",
        "endTimeUnixNano": "1796000000100000000",
    }

    response = post_traces(owner.key, body_of(good[0], bad_id, good[1], reversed_times, good[2]))

    assert response.status_code == 200
    partial = json_of(response)["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    assert "span 1: spanId" in partial["errorMessage"]
    assert "span 3: endTimeUnixNano is before startTimeUnixNano" in partial["errorMessage"]
    assert sorted(Span.objects.values_list("name", flat=True)) == ["good", "good", "good"]
    assert Session.objects.get(external_id="partial").span_count == 3


def test_a_partial_success_in_protobuf_is_a_protobuf_response(owner):
    trace_id = new_trace_id()
    good = proto_span(
        "good", trace_id=trace_id, span_id=new_span_id(), attributes={"session.id": "p"}
    )
    bad = proto_span("bad", trace_id=trace_id, span_id=new_span_id())
    bad.span_id = b"\x01\x02"

    response = post_traces(owner.key, proto_body(good, bad), PROTOBUF)

    assert response.status_code == 200
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert "spanId" in answer.partial_success.error_message
    assert list(Span.objects.values_list("name", flat=True)) == ["good"]


def test_a_batch_of_only_bad_spans_is_a_partial_success_storing_nothing(owner):
    response = post_traces(owner.key, body_of(span() | {"traceId": "0" * 32}))

    assert response.status_code == 200
    assert json_of(response)["partialSuccess"]["rejectedSpans"] == "1"
    assert stored() == (0, 0)


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
    monkeypatch.setattr(ingest, "_in_flight", slots)
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

    monkeypatch.setattr(ingest, "spans_ingest", down)

    response = post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    assert response.status_code == 503 and response["Retry-After"]
    assert post_traces(owner.key, b"{}").status_code == 503  # and the slot was given back


# --- sessions --------------------------------------------------------------------------------


def test_the_session_is_the_association_property_then_session_id_then_conversation_id(owner):
    keys = {
        "a": {
            "traceloop.association.properties.session_id": "assoc",
            "session.id": "plain",
            "gen_ai.conversation.id": "conv",
        },
        "b": {"session.id": "plain", "gen_ai.conversation.id": "conv"},
        "c": {"gen_ai.conversation.id": "conv"},
    }

    post_traces(owner.key, body_of(*(span(name, attributes=a) for name, a in keys.items())))

    assert dict(Span.objects.values_list("name", "session__external_id")) == {
        "a": "assoc",
        "b": "plain",
        "c": "conv",
    }


def test_a_resource_session_id_applies_to_every_span_of_the_resource(owner):
    post_traces(owner.key, body_of(span("x"), span("y"), resource={"session.id": "from-resource"}))

    assert Session.objects.get(external_id="from-resource").span_count == 2


def test_a_span_without_a_session_id_takes_its_traces_session_in_the_same_batch(owner):
    document = fixture_doc("sdk_raw_http_long_history.json")
    chat = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert not any(a["key"].endswith("session_id") for a in chat["attributes"])
    post = span(
        "POST",
        trace_id=chat["traceId"],
        parent=chat["spanId"],
        attributes={
            "traceloop.association.properties.session_id": "long-run",
            "http.method": "POST",
        },
    )
    document["resourceSpans"][0]["scopeSpans"][0]["spans"].append(post)

    assert post_traces(owner.key, document).status_code == 200

    session = Session.objects.get(external_id="long-run")
    assert set(Span.objects.values_list("session", flat=True)) == {session.pk}
    call = Span.objects.get(span_id=chat["spanId"])
    assert call.is_llm and len(call.input_messages) == 61
    assert session.llm_call_count == 1


def test_a_span_without_a_session_id_takes_the_session_its_trace_already_has(owner):
    document = fixture_doc("sdk_raw_http_long_history.json")
    chat = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    post = span(
        "POST",
        trace_id=chat["traceId"],
        parent=chat["spanId"],
        attributes={"traceloop.association.properties.session_id": "long-run"},
    )
    post_traces(owner.key, body_of(post))  # the child ended first: it came in an earlier batch

    post_traces(owner.key, document)

    assert Span.objects.get(span_id=chat["spanId"]).session.external_id == "long-run"
    assert Session.objects.count() == 1


def test_spans_with_no_session_id_anywhere_are_a_session_of_their_trace(owner):
    trace_id = new_trace_id()
    post_traces(owner.key, body_of(span("a", trace_id=trace_id), span("b", trace_id=trace_id)))

    session = Session.objects.get()
    assert session.external_id == f"trace:{trace_id}" and session.span_count == 2


def test_a_session_spanning_many_traces_is_one_session(owner):
    """Every SDK task() is a new trace; the session id joins them (sdk_batch has three)."""
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    assert Span.objects.values("trace_id").distinct().count() == 3
    assert Session.objects.count() == 1


# --- what is read from the spans ----------------------------------------------------------------


def test_llm_calls_are_read_from_the_current_attribute_format(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    call = Span.objects.get(span_id="a8c856a54b5c6625")
    assert call.is_llm and call.model == "gpt-4o-mini-2024"
    assert call.input_messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    ]
    assert call.output_messages == [{"role": "assistant", "content": "4"}]
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (20, 1, 21)
    assert call.duration_ms == pytest.approx(17.909, abs=0.01)


def test_llm_calls_are_read_from_the_older_attribute_format(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    raw = Span.objects.get(name="chat meta-llama/llama-3-8b")
    assert raw.is_llm and raw.scope_name == "belvedir-http"
    assert raw.input_messages == [{"role": "user", "content": "raw requests"}]
    assert raw.output_messages[0]["role"] == "assistant" and raw.output_messages[0]["content"]
    assert (raw.input_tokens, raw.output_tokens, raw.total_tokens) == (20, 1, 21)


def test_older_token_keys_and_importer_doubles_are_counted(owner):
    older = span(
        "ollama.chat",
        attributes={
            "session.id": "older",
            "gen_ai.system": "Ollama",
            "llm.request.type": "chat",
            "gen_ai.request.model": "llama3",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hello",
            "gen_ai.usage.prompt_tokens": 7,
            "gen_ai.usage.completion_tokens": 2,
            "llm.usage.total_tokens": 10,
        },
    )
    post_traces(owner.key, body_of(older))
    post_traces(owner.key, fixture_bytes("sdk_import_batch.json"))

    call = Span.objects.get(name="ollama.chat")
    assert (call.model, call.input_tokens, call.output_tokens, call.total_tokens) == (
        "llama3",
        7,
        2,
        10,
    )
    assert call.output_messages == [{"role": "assistant", "content": "hello"}]
    imported = Span.objects.get(name="ChatOpenAI")
    assert (imported.model, imported.input_tokens, imported.output_tokens) == ("gpt-4o", 12, 1)
    assert Session.objects.get(external_id="conv-42").llm_call_count == 2


def test_workflow_task_and_tool_spans_keep_their_span_kind(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    post_traces(owner.key, fixture_bytes("sdk_import_batch.json"))
    post_traces(
        owner.key,
        body_of(span("fetch.task", attributes={"session.id": "k", "traceloop.span.kind": "task"})),
    )

    kinds = dict(Span.objects.exclude(span_kind="").values_list("name", "span_kind"))
    assert kinds == {
        "answer the question.workflow": "workflow",
        "raw http.workflow": "workflow",
        "failing task.workflow": "workflow",
        "calculator": "tool",
        "fetch.task": "task",
    }
    assert Span.objects.get(name="fetch.task").entity_name == "fetch"
    assert (
        Span.objects.get(name="answer the question.workflow").entity_name == "answer the question"
    )
    assert Span.objects.get(name="openai.chat", span_id="a8c856a54b5c6625").span_kind == ""


def test_absurd_token_counts_are_not_stored_as_counts_and_do_not_fail_the_batch(owner):
    post_traces(
        owner.key,
        body_of(
            span(
                "odd",
                attributes=llm_attributes("odd")
                | {"gen_ai.usage.input_tokens": 2**62, "gen_ai.usage.total_tokens": 2**40},
            )
        ),
    )

    call = Span.objects.get(name="odd")
    assert call.is_llm and call.input_tokens is None and call.output_tokens == 3


# --- runs --------------------------------------------------------------------------------


def test_spans_sent_with_a_run_key_belong_to_the_run(running_run):
    post_traces(running_run.key, fixture_bytes("sdk_batch.json"))  # session id "run_capture_1"

    session = Session.objects.get(external_id="run_capture_1")
    assert session.run == running_run
    assert set(Span.objects.values_list("run", flat=True)) == {running_run.pk}


def test_a_harness_session_named_by_its_run_id_belongs_to_the_run(running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    session = Session.objects.get(external_id=running_run.pk)
    assert session.run == running_run and session.project == running_run.project
    assert Span.objects.get().run == running_run


def test_a_project_key_session_named_by_a_run_id_of_the_project_belongs_to_that_run(
    owner, running_run
):
    post_traces(owner.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    assert Session.objects.get(external_id=running_run.pk).run == running_run
    assert Span.objects.get().run == running_run


def test_a_session_named_by_another_projects_run_id_belongs_to_no_run(outsider, running_run):
    post_traces(outsider.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    session = Session.objects.get(external_id=running_run.pk)
    assert session.project == outsider.project and session.run is None
    assert Span.objects.get().run is None


def test_a_run_key_cannot_write_into_another_runs_session(owner, running_run, harness):
    other = Run.objects.create(
        project=owner.project, harness=harness, harness_name="h", status="running"
    )
    # Named after the other run (not yet seen), and an existing session of the other run.
    response = post_traces(
        running_run.key, body_of(span("call", attributes=llm_attributes(other.pk)))
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "a run key writes only into its own run's sessions" in partial["errorMessage"]
    assert not Session.objects.filter(external_id=other.pk).exists()
    post_traces(owner.key, body_of(span("call", attributes=llm_attributes("shared"))))
    Session.objects.filter(external_id="shared").update(run=other)
    before = Session.objects.get(external_id="shared")
    response = post_traces(
        running_run.key,
        body_of(
            span("a", span_id="1" * 16, attributes=llm_attributes("shared")),
            span("b", span_id="2" * 16, attributes=llm_attributes(running_run.pk)),
        ),
    )
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    after = Session.objects.get(external_id="shared")
    assert after.run == other and after.span_count == before.span_count == 1
    assert after.last_received_at == before.last_received_at
    assert Span.objects.get(name="b").run == running_run


def test_a_run_key_cannot_claim_a_project_keys_session(owner, running_run):
    post_traces(owner.key, body_of(span("call", attributes=llm_attributes("project-session"))))
    response = post_traces(
        running_run.key,
        body_of(span("x", span_id="3" * 16, attributes=llm_attributes("project-session"))),
    )
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert Session.objects.get(external_id="project-session").run is None
    assert not Span.objects.filter(name="x").exists()


# --- outcomes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["success", "fail"])
def test_an_outcome_right_after_the_flush_is_stored(owner, outcome):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    response = post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": outcome})

    assert response.status_code == 200
    assert response.json() == {"session_id": "run_capture_1", "outcome": outcome}
    session = Session.objects.get(external_id="run_capture_1")
    assert session.outcome == outcome and session.outcome_at is not None


def test_a_later_outcome_replaces_the_earlier_one(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": "success"})
    post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": "fail"})

    assert Session.objects.get().outcome == "fail"


def test_the_run_key_reports_its_own_sessions_outcome(running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    response = post_outcome(running_run.key, {"session_id": running_run.pk, "outcome": "success"})

    assert response.status_code == 200
    assert Session.objects.get(run=running_run).outcome == "success"


def test_an_outcome_for_an_unknown_session_is_a_404(owner, outsider):
    post_traces(outsider.key, fixture_bytes("sdk_batch.json"))  # another project's session

    for session_id in ["nobody", "run_capture_1"]:
        response = post_outcome(owner.key, {"session_id": session_id, "outcome": "success"})
        assert response.status_code == 404
        assert "session_id" in response.json()
    assert Session.objects.get().outcome == ""


@pytest.mark.parametrize("outcome", ["maybe", "SUCCESS", "", None, 1, ["success"]])
def test_any_other_outcome_is_a_400_naming_the_field(owner, outcome):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    response = post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": outcome})

    assert response.status_code == 400
    assert "outcome" in response.json()
    assert Session.objects.get().outcome == ""


@pytest.mark.parametrize(
    "raw",
    [
        b"{nope",
        b"",
        b"[]",
        b'"success"',
        b"\xff",
        b'{"outcome": "success"}',
        b'{"session_id": 5, "outcome": "fail"}',
    ],
    ids=["malformed", "empty", "array", "string", "not-utf8", "no-session", "session-not-string"],
)
def test_a_bad_outcome_body_is_a_400(owner, raw):
    response = post_outcome(owner.key, None, raw=raw)

    assert response.status_code == 400
    assert response.json()


def test_a_session_id_postgres_cannot_hold_is_a_404_not_a_500(owner):
    response = post_outcome(owner.key, {"session_id": "abc\u0000def", "outcome": "success"})

    assert response.status_code == 404


@pytest.mark.parametrize("key", [None, "bv_live_unknown", "wrong"])
def test_an_outcome_with_a_bad_key_is_a_401(owner, key):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    response = post_outcome(key, {"session_id": "run_capture_1", "outcome": "success"})

    assert response.status_code == 401
    assert Session.objects.get().outcome == ""


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

    for view, ctype in [(ingest.traces, JSON), (ingest.outcomes, JSON)]:
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
