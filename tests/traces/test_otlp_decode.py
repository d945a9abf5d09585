"""OTLP decoding: bodies the belvedir SDK sent, their protobuf twins, and hostile input.

Pure Python, no database. The fixtures were captured from belvedir 0.6.4 posting to a
local recorder (see docs/sdk-wire-format.md):

* ``sdk_batch.json``: one flush of a session with two ``task()`` workflows, two OpenAI
  client calls (plain and streamed), raw ``requests``/``httpx`` chat calls and a failing task;
* ``sdk_raw_http_long_history.json``: a raw-HTTP chat call with an 80-message history;
* ``sdk_import_batch.json``: spans built by the SDK's file and LangSmith importers.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.traces.helpers import (
    JSON,
    PROTOBUF,
    decode_json,
    encode_json,
    fixture_bytes,
    fixture_doc,
    many_spans,
    request_doc,
    span_doc,
    to_protobuf,
)
from traces.otlp import (
    OtlpDecodeError,
    PayloadTooLarge,
    TooManySpans,
    UnsupportedMediaType,
    decode_request,
    encode_error,
    encode_response,
    parse_llm_call,
    session_id_of,
)

# -- What the SDK sends ------------------------------------------------------------


def test_an_sdk_flush_decodes_every_span_with_its_tree_and_session():
    batch = decode_request(fixture_bytes("sdk_batch.json"), JSON, None)

    assert batch.rejected == 0 and batch.errors == []
    assert len(batch.spans) == 8
    by_name = {span.name: span for span in batch.spans}
    workflow = by_name["answer the question.workflow"]
    chat = next(s for s in batch.spans if s.name == "openai.chat")
    assert chat.parent_span_id == workflow.span_id == "31c2eb5c6ec05d35"
    assert chat.trace_id == workflow.trace_id == "530de291307fea47013dde9805dd505e"
    assert workflow.parent_span_id == ""
    assert (workflow.kind, chat.kind) == ("internal", "client")
    assert chat.scope_name == "opentelemetry.instrumentation.openai.v1"
    assert chat.resource_attributes["service.name"] == "capture-agent"
    assert chat.attributes["gen_ai.request.temperature"] == 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat.start_ns == 1796001688487441894 and chat.end_ns > chat.start_ns
    assert {session_id_of(s.attributes, s.resource_attributes) for s in batch.spans} == {
        "run_capture_1"
    }


def test_a_failing_task_keeps_its_error_status_and_exception_event():
    batch = decode_request(fixture_bytes("sdk_batch.json"), JSON, None)

    failing = next(s for s in batch.spans if s.name == "failing task.workflow")
    assert (failing.status_code, failing.status_message) == ("error", "boom")
    (event,) = failing.events
    assert event["name"] == "exception"
    assert event["time_ns"] == 1796001688559344042
    assert event["attributes"]["exception.type"] == "ValueError"


@pytest.mark.parametrize(
    "fixture", ["sdk_batch.json", "sdk_raw_http_long_history.json", "sdk_import_batch.json"]
)
def test_json_and_protobuf_of_the_same_request_decode_to_equal_spans(fixture):
    from_json = decode_request(fixture_bytes(fixture), JSON, None)
    from_protobuf = decode_request(to_protobuf(fixture_doc(fixture)), PROTOBUF, None)

    assert from_json.rejected == from_protobuf.rejected == 0
    assert from_json.spans == from_protobuf.spans


def test_a_gzipped_body_decodes_like_the_plain_one_with_or_without_the_header():
    plain = decode_request(fixture_bytes("sdk_batch.json"), JSON, None).spans
    body = gzip.compress(fixture_bytes("sdk_batch.json"))

    assert decode_request(body, JSON, "gzip").spans == plain
    assert decode_request(body, "application/json; charset=utf-8", None).spans == plain
    assert decode_request(body, JSON, "GZIP").spans == plain


def test_gzipped_protobuf_and_deflate_bodies_decode_too():
    protobuf = to_protobuf(fixture_doc("sdk_batch.json"))
    expected = decode_request(protobuf, PROTOBUF, None).spans

    assert decode_request(gzip.compress(protobuf), PROTOBUF, "gzip").spans == expected
    assert decode_request(zlib.compress(protobuf), PROTOBUF, "deflate").spans == expected


def test_importer_spans_with_double_token_counts_are_read_as_integers():
    batch = decode_request(fixture_bytes("sdk_import_batch.json"), JSON, None)

    langsmith = next(s for s in batch.spans if s.name == "ChatOpenAI")
    call = parse_llm_call(langsmith.attributes)
    assert langsmith.attributes["gen_ai.usage.input_tokens"] == 12.0
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (12, 1, 13)
    assert call.model == "gpt-4o"
    assert session_id_of(langsmith.attributes, langsmith.resource_attributes) == "ls-thread-1"


# -- Limits -------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_before_anything_else():
    body = encode_json(many_spans(5))

    with pytest.raises(PayloadTooLarge):
        decode_request(body, JSON, None, max_bytes=len(body) - 1)
    assert len(decode_request(body, JSON, None, max_bytes=len(body)).spans) == 5


def test_a_small_gzip_body_that_inflates_past_the_limit_is_refused():
    body = encode_json(many_spans(50))
    compressed = gzip.compress(body)
    assert len(compressed) < len(body) // 4

    with pytest.raises(PayloadTooLarge):
        decode_request(compressed, JSON, "gzip", max_bytes=len(body) - 1)
    assert len(decode_request(compressed, JSON, "gzip", max_bytes=len(body)).spans) == 50


def test_a_gzip_bomb_is_refused_without_inflating_it():
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    bomb = b"".join(deflater.compress(zeros) for _ in range(512)) + deflater.flush()
    assert len(bomb) < 1 << 20  # 512 MiB of zeros in well under 1 MiB

    tracemalloc.start()
    try:
        with pytest.raises(PayloadTooLarge):
            decode_request(bomb, JSON, "gzip")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


def test_a_truncated_or_corrupt_gzip_body_is_a_decode_error():
    body = gzip.compress(encode_json(many_spans(3)))

    with pytest.raises(OtlpDecodeError):
        decode_request(body[: len(body) // 2], JSON, "gzip")
    with pytest.raises(OtlpDecodeError):
        decode_request(body[:10] + b"garbage" + body[17:], JSON, "gzip")
    with pytest.raises(OtlpDecodeError):
        decode_request(body + b"trailing", JSON, "gzip")


def test_concatenated_gzip_members_are_one_body():
    body = encode_json(many_spans(3))
    half = len(body) // 2

    two_members = gzip.compress(body[:half]) + gzip.compress(body[half:])
    assert len(decode_request(two_members, JSON, "gzip").spans) == 3
    with pytest.raises(OtlpDecodeError):
        decode_request(
            b"".join(gzip.compress(b" ") for _ in range(100)) + gzip.compress(body), JSON, "gzip"
        )


@pytest.mark.parametrize("encode,content_type", [(encode_json, JSON), (to_protobuf, PROTOBUF)])
def test_1001_spans_are_too_many_but_1000_are_fine(encode, content_type):
    with pytest.raises(TooManySpans):
        decode_request(encode(many_spans(1001)), content_type, None)
    assert len(decode_request(encode(many_spans(1000)), content_type, None).spans) == 1000


def test_an_unknown_content_type_or_encoding_is_unsupported():
    body = encode_json(many_spans(1))

    for content_type in ("text/plain", "", None, "application/jsonx"):
        with pytest.raises(UnsupportedMediaType):
            decode_request(body, content_type, None)
    with pytest.raises(UnsupportedMediaType):
        decode_request(body, JSON, "br")


def test_refusals_carry_the_http_status_to_answer_with():
    assert OtlpDecodeError.http_status == 400
    assert PayloadTooLarge.http_status == TooManySpans.http_status == 413
    assert UnsupportedMediaType.http_status == 415


# -- Structurally broken bodies ----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"resourceSpans"',
        b'{"resourceSpans": {}}',
        b'{"resourceSpans": [1]}',
        b'{"resourceSpans": [{"scopeSpans": "x"}]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": {}}]}]}',
        b"\xff\xfe\x00garbage",
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_a_body_that_is_not_an_otlp_json_object_is_a_decode_error(body):
    with pytest.raises(OtlpDecodeError):
        decode_request(body, JSON, None)


def test_bytes_that_are_not_protobuf_are_a_decode_error():
    with pytest.raises(OtlpDecodeError):
        decode_request(b"\x0a\xff\xff\xff\xff\x0f", PROTOBUF, None)
    with pytest.raises(OtlpDecodeError):
        decode_request(b'{"resourceSpans": []}', PROTOBUF, None)


def test_an_empty_request_has_no_spans():
    assert decode_request(b"{}", JSON, None).spans == []
    assert decode_request(b'{"resourceSpans": null}', JSON, None).spans == []
    assert decode_request(b"", PROTOBUF, None).spans == []


# -- Per-span rejections ------------------------------------------------------------


def nested_array(depth: int) -> dict:
    value: dict = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


BAD_SPANS = {
    "short trace id": {"traceId": "5b8efff798038103"},
    "non-hex trace id": {"traceId": "zb8efff798038103d269b633813fc60c"},
    "all-zero trace id": {"traceId": "0" * 32},
    "missing trace id": {"traceId": None},
    "numeric span id": {"spanId": 12345},
    "trace-length span id": {"spanId": "5b8efff798038103d269b633813fc60c"},
    "all-zero span id": {"spanId": "0" * 16},
    "bad parent id": {"parentSpanId": "xyz"},
    "end before start": {"endTimeUnixNano": "1699999999000000000"},
    "missing start": {"startTimeUnixNano": None},
    "zero end": {"endTimeUnixNano": "0"},
    "non-numeric time": {"startTimeUnixNano": "soon"},
    "time past uint64": {"endTimeUnixNano": str(2**64)},
    "non-string name": {"name": 42},
    "unknown kind": {"kind": "SPAN_KIND_SIDEWAYS"},
    "status not an object": {"status": "ok"},
    "events not a list": {"events": {"name": "x"}},
    "attributes not a list": {"attributes": {"a": 1}},
    "attribute key missing": {"attributes": [{"value": {"stringValue": "x"}}]},
    "string value of wrong type": {"attributes": [{"key": "a", "value": {"stringValue": 5}}]},
    "int value not an integer": {"attributes": [{"key": "a", "value": {"intValue": "1.5"}}]},
    "int value past int64": {"attributes": [{"key": "a", "value": {"intValue": str(2**63)}}]},
    "bool value as string": {"attributes": [{"key": "a", "value": {"boolValue": "true"}}]},
    "double value as text": {"attributes": [{"key": "a", "value": {"doubleValue": "lots"}}]},
    "bytes value not base64": {"attributes": [{"key": "a", "value": {"bytesValue": "@@"}}]},
    "two value kinds": {
        "attributes": [{"key": "a", "value": {"stringValue": "x", "intValue": "1"}}]
    },
    "nesting deeper than 16": {"attributes": [{"key": "a", "value": nested_array(16)}]},
}


@pytest.mark.parametrize("fault", BAD_SPANS)
def test_a_bad_span_is_rejected_while_the_good_spans_are_kept(fault):
    bad = span_doc(**{"spanId": "00000000000000bb", **BAD_SPANS[fault]})
    document = request_doc(
        span_doc(spanId="00000000000000a1"), bad, span_doc(spanId="00000000000000a2")
    )

    batch = decode_json(document)

    assert [s.span_id for s in batch.spans] == ["00000000000000a1", "00000000000000a2"]
    assert batch.rejected == 1
    assert batch.errors[0].startswith("span 1: ")
    assert batch.error_message == batch.errors[0]


def test_nesting_up_to_the_limit_is_kept():
    batch = decode_json(request_doc(span_doc(attributes=[{"key": "a", "value": nested_array(15)}])))

    assert batch.rejected == 0
    value = batch.spans[0].attributes["a"]
    for _ in range(15):
        (value,) = value
    assert value == "leaf"


def test_a_bad_resource_rejects_its_spans_only():
    document = request_doc(span_doc(), span_doc(spanId="00000000000000a2"))
    document["resourceSpans"].insert(
        0, {"resource": {"attributes": "nope"}, "scopeSpans": [{"spans": [span_doc()]}]}
    )

    batch = decode_json(document)

    assert (len(batch.spans), batch.rejected) == (2, 1)
    assert "attributes is not a list" in batch.errors[0]


def test_protobuf_spans_with_bad_ids_or_times_are_rejected_too():
    document = request_doc(
        span_doc(spanId="00000000000000a1"),
        span_doc(spanId="00000000000000bb", endTimeUnixNano="1"),
        span_doc(spanId="00000000000000a2"),
    )
    request = ExportTraceServiceRequest.FromString(to_protobuf(document))
    request.resource_spans[0].scope_spans[0].spans[2].trace_id = b"\x01\x02"

    batch = decode_request(request.SerializeToString(), PROTOBUF, None)

    assert [s.span_id for s in batch.spans] == ["00000000000000a1"]
    assert batch.rejected == 2
    assert "endTimeUnixNano is before" in batch.errors[0]
    assert "traceId is not 16 bytes" in batch.errors[1]


def test_a_rejection_reason_quoting_a_huge_key_stays_short():
    span = span_doc(attributes=[{"key": "k" * 100_000, "value": {"stringValue": 1}}])

    batch = decode_json(request_doc(span))

    assert batch.rejected == 1 and len(batch.error_message) < 250


def test_the_error_list_is_capped_but_the_count_is_not():
    spans = [span_doc(spanId=f"{i + 1:016x}", name=i) for i in range(50)]

    batch = decode_json(request_doc(*spans))

    assert batch.rejected == 50 and len(batch.errors) == 20
    assert batch.error_message.endswith("(and 30 more)")


# -- Responses ----------------------------------------------------------------------


def test_a_full_success_answers_an_empty_response_in_the_request_encoding():
    assert encode_response(JSON) == (b"{}", JSON)
    body, content_type = encode_response(PROTOBUF)
    assert (body, content_type) == (b"", PROTOBUF)


def test_a_partial_success_names_the_rejected_count_as_a_string_in_json():
    body, content_type = encode_response(
        "application/json; charset=utf-8", rejected=2, error_message="span 1: bad"
    )

    assert content_type == JSON
    assert json.loads(body) == {
        "partialSuccess": {"rejectedSpans": "2", "errorMessage": "span 1: bad"}
    }


def test_a_partial_success_in_protobuf_parses_back():
    body, content_type = encode_response(PROTOBUF, rejected=3, error_message="bad ids")

    response = ExportTraceServiceResponse.FromString(body)
    assert content_type == PROTOBUF
    assert response.partial_success.rejected_spans == 3
    assert response.partial_success.error_message == "bad ids"


def test_error_bodies_are_google_rpc_status_in_the_request_encoding():
    body, content_type = encode_error(JSON, http_status=413, message="too big")
    assert (json.loads(body), content_type) == ({"code": 8, "message": "too big"}, JSON)

    body, content_type = encode_error(PROTOBUF, http_status=400, message="é" * 200)
    text = ("é" * 200).encode()
    assert content_type == PROTOBUF
    assert body == b"\x08\x03\x12" + bytes([len(text) & 0x7F | 0x80, len(text) >> 7]) + text
