"""POST /api/v1/traces through the real endpoint on PostgreSQL: stored in both encodings,
idempotent, partial success.

Bodies are what the belvedir SDK 0.6.4 sent (tests/traces/fixtures), their protobuf twins,
and spans built here; see docs/sdk-wire-format.md.
"""

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.traces.helpers import (
    JSON,
    MB,
    PROTOBUF,
    body_of,
    fixture_bytes,
    fixture_doc,
    json_of,
    llm_attributes,
    new_span_id,
    new_trace_id,
    post_traces,
    proto_body,
    proto_span,
    span,
    stored,
    to_protobuf,
)
from traces.models import Session, Span

pytestmark = pytest.mark.django_db


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
