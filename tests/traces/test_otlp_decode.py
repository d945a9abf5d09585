"""OTLP decoding: bodies the belvedir SDK sent, their protobuf twins, and hostile input.

Pure Python, no database. The fixtures were captured from belvedir 0.6.4 posting to a
local recorder (see docs/sdk-wire-format.md):

* ``sdk_batch.json``: one flush of a session with two ``task()`` workflows, two OpenAI
  client calls (plain and streamed), raw ``requests``/``httpx`` chat calls and a failing task;
* ``sdk_raw_http_long_history.json``: a raw-HTTP chat call with an 80-message history;
* ``sdk_import_batch.json``: spans built by the SDK's file and LangSmith importers.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import math
import tracemalloc
import zlib
from pathlib import Path

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from traces.otlp import (
    TRUNCATION_MARKER,
    OtlpDecodeError,
    OtlpError,
    PayloadTooLarge,
    TooManySpans,
    UnsupportedMediaType,
    decode_request,
    encode_error,
    encode_response,
    entity_name_of,
    parse_llm_call,
    session_id_of,
    span_kind_of,
)

FIXTURES = Path(__file__).parent / "fixtures"
JSON = "application/json"
PROTOBUF = "application/x-protobuf"
REFUSALS = (OtlpDecodeError, PayloadTooLarge, TooManySpans, UnsupportedMediaType)


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_doc(name: str) -> dict:
    return json.loads(fixture_bytes(name))


def to_protobuf(document: dict) -> bytes:
    """The same request as protobuf, built independently with json_format (ids as base64)."""
    document = copy.deepcopy(document)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.ParseDict(document, ExportTraceServiceRequest()).SerializeToString()


def span_doc(**overrides) -> dict:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "openai.chat",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}}],
        "status": {"code": 0},
    }
    span.update(overrides)
    return span


def request_doc(*spans: dict) -> dict:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}


def encode_json(document: dict) -> bytes:
    return json.dumps(document).encode()


def decode_json(document: dict, **kwargs):
    return decode_request(encode_json(document), JSON, None, **kwargs)


def many_spans(count: int) -> dict:
    return request_doc(*(span_doc(spanId=f"{i + 1:016x}") for i in range(count)))


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


# -- Lenient readings ---------------------------------------------------------------


def test_base64_ids_enum_names_and_numeric_values_are_accepted():
    span = span_doc(
        traceId=base64.b64encode(bytes.fromhex("5b8efff798038103d269b633813fc60c")).decode(),
        spanId=base64.b64encode(bytes.fromhex("eee19b7ec3c1b174")).decode(),
        parentSpanId="0" * 16,
        kind="SPAN_KIND_SERVER",
        startTimeUnixNano=1700000000000000000,
        status={"code": "STATUS_CODE_ERROR", "message": "bad"},
        attributes=[
            {"key": "n", "value": {"intValue": 7}},
            {"key": "s", "value": {"intValue": "-7"}},
            {"key": "d", "value": {"doubleValue": 1}},
            {"key": "b", "value": {"bytesValue": "aGk="}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {}}]}}},
            {"key": "empty", "value": {}},
            {"key": "future", "value": {"someNewValue": 1}},
        ],
    )

    (decoded,) = decode_json(request_doc(span)).spans

    assert decoded.trace_id == "5b8efff798038103d269b633813fc60c"
    assert decoded.span_id == "eee19b7ec3c1b174"
    assert decoded.parent_span_id == ""
    assert (decoded.kind, decoded.status_code, decoded.status_message) == ("server", "error", "bad")
    assert decoded.start_ns == 1700000000000000000
    assert decoded.attributes == {
        "n": 7, "s": -7, "d": 1.0, "b": "aGk=", "kv": {"x": None}, "empty": None, "future": None,
    }  # fmt: skip


def test_upper_case_hex_ids_come_back_lower_case():
    (decoded,) = decode_json(
        request_doc(span_doc(traceId="5B8EFFF798038103D269B633813FC60C"))
    ).spans

    assert decoded.trace_id == "5b8efff798038103d269b633813fc60c"


def test_nan_and_infinity_become_strings_in_json_and_protobuf():
    body = (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":['
        + encode_json(span_doc(attributes=[]))[:-1]
        + b', "attributes": [{"key": "a", "value": {"doubleValue": NaN}},'
        b'{"key": "b", "value": {"doubleValue": -Infinity}},'
        b'{"key": "c", "value": {"doubleValue": "Infinity"}}]}]}]}]}'
    )

    (from_json,) = decode_request(body, JSON, None).spans
    assert from_json.attributes == {"a": "NaN", "b": "-Infinity", "c": "Infinity"}

    request = ExportTraceServiceRequest.FromString(
        to_protobuf(request_doc(span_doc(attributes=[])))
    )
    pair = request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="a")
    pair.value.double_value = math.nan
    (from_protobuf,) = decode_request(request.SerializeToString(), PROTOBUF, None).spans
    assert from_protobuf.attributes == {"a": "NaN"}


def test_a_huge_string_is_truncated_with_a_marker_and_counted():
    long_text = "x" * 5000
    span = span_doc(
        attributes=[{"key": "gen_ai.input.messages", "value": {"stringValue": long_text}}]
    )

    batch = decode_json(request_doc(span), max_value_chars=1000)

    value = batch.spans[0].attributes["gen_ai.input.messages"]
    assert value == "x" * 1000 + TRUNCATION_MARKER
    assert batch.truncated_values == 1 and batch.rejected == 0


def test_nul_characters_and_lone_surrogates_are_replaced_so_postgres_can_store_them():
    span = span_doc(
        name="a\u0000b",
        attributes=[{"key": "k\u0000", "value": {"stringValue": "x\ud800y"}}],
    )
    body = json.dumps(request_doc(span)).encode()
    assert b"\\u0000" in body and b"\\ud800" in body

    (decoded,) = decode_request(body, JSON, None).spans

    assert decoded.name == "a\ufffdb"
    assert decoded.attributes == {"k\ufffd": "x\ufffdy"}
    json.dumps(decoded.attributes).encode("utf-8")


def test_json_must_be_utf8_so_no_nul_or_surrogate_slips_in_another_way():
    document = request_doc(span_doc(name="a\u0000b"))

    with pytest.raises(OtlpDecodeError):
        decode_request(json.dumps(document).encode("utf-16"), JSON, None)
    with pytest.raises(OtlpDecodeError):
        decode_request(b'{"resourceSpans": [], "x": "\xed\xa0\x80"}', JSON, None)
    assert decode_request(b"\xef\xbb\xbf{}", JSON, None).spans == []


def test_an_emoji_sent_as_a_surrogate_pair_survives():
    span = span_doc(attributes=[{"key": "a", "value": {"stringValue": "ok 👍"}}])

    (decoded,) = decode_request(json.dumps(request_doc(span)).encode(), JSON, None).spans

    assert decoded.attributes["a"] == "ok 👍"


# -- LLM calls ----------------------------------------------------------------------


def spans_by_name(fixture: str) -> dict:
    return {s.name: s for s in decode_request(fixture_bytes(fixture), JSON, None).spans}


def test_an_openai_client_call_is_read_from_the_current_gen_ai_attributes():
    chat = next(
        s
        for s in decode_request(fixture_bytes("sdk_batch.json"), JSON, None).spans
        if s.name == "openai.chat" and not s.attributes["gen_ai.is_streaming"]
    )

    call = parse_llm_call(chat.attributes)

    assert call.input_messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    ]
    assert call.output_messages == [{"role": "assistant", "content": "4"}]
    assert (call.request_model, call.response_model, call.model) == (
        "gpt-4o-mini",
        "gpt-4o-mini-2024",
        "gpt-4o-mini-2024",
    )
    assert (call.provider, call.operation) == ("openai", "chat")
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (20, 1, 21)
    assert call.finish_reasons == ["stop"]


def test_a_raw_http_call_is_read_from_the_older_indexed_attributes():
    call = parse_llm_call(spans_by_name("sdk_batch.json")["chat qwen/qwen3"].attributes)

    assert call.input_messages == [{"role": "user", "content": "raw httpx stream"}]
    assert call.output_messages == [{"role": "assistant", "content": "Hello!"}]
    assert call.request_model == "qwen/qwen3" and call.operation == "chat"
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (11, 2, 13)


def test_a_long_raw_http_history_loses_its_session_to_the_sdk_cap_yet_stays_an_llm_call():
    (span,) = decode_request(fixture_bytes("sdk_raw_http_long_history.json"), JSON, None).spans

    call = parse_llm_call(span.attributes)

    assert len(span.attributes) == 128
    assert session_id_of(span.attributes, span.resource_attributes) is None
    assert call is not None and call.request_model == ""
    assert call.input_messages[0] == {"role": "assistant", "content": "m19"}
    assert len(call.input_messages) == 61


def test_the_older_format_keeps_order_roles_tool_calls_and_finish_reasons():
    attributes = {
        "llm.request.type": "chat",
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-3-5-sonnet",
        "gen_ai.prompt.10.role": "user",
        "gen_ai.prompt.10.content": "eleventh",
        "gen_ai.prompt.2.content": "third, no role",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "be nice",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.1.name": "b",
        "gen_ai.completion.0.tool_calls.0.name": "a",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"x": 1}',
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 5,
        "llm.usage.total_tokens": 40,
    }

    call = parse_llm_call(attributes)

    assert call.input_messages == [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "third, no role"},
        {"role": "user", "content": "eleventh"},
    ]
    assert call.output_messages == [
        {"role": "assistant", "content": '[tool_call] a({"x": 1})\n[tool_call] b()'}
    ]
    assert call.finish_reasons == ["tool_calls"]
    assert (call.provider, call.model) == ("Anthropic", "claude-3-5-sonnet")
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (30, 5, 40)


def test_the_current_format_reads_system_instructions_tool_calls_and_tool_results():
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "You are terse."}]),
        "gen_ai.input.messages": json.dumps(
            [
                {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "reasoning", "content": "hidden"},
                        {
                            "type": "tool_call",
                            "id": "t1",
                            "name": "weather",
                            "arguments": {"c": "Oslo"},
                        },
                    ],
                },
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": "t1", "response": "rain"}],
                },
                {
                    "role": "user",
                    "parts": [{"type": "uri", "modality": "image", "uri": "https://x"}],
                },
            ]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": "Rain."}],
                    "finish_reason": "stop",
                }
            ]
        ),
        "gen_ai.usage.input_tokens": 50,
    }

    call = parse_llm_call(attributes)

    assert call.input_messages == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": '[tool_call] weather({"c": "Oslo"})'},
        {"role": "tool", "content": "rain"},
        {"role": "user", "content": "[uri]"},
    ]
    assert call.output_messages == [{"role": "assistant", "content": "Rain."}]
    assert call.finish_reasons == ["stop"]
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (50, None, None)


def test_unparseable_message_json_falls_back_to_the_indexed_attributes():
    attributes = {
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "cut of'
        + TRUNCATION_MARKER,
        "gen_ai.prompt.0.content": "from the old format",
    }

    call = parse_llm_call(attributes)

    assert call.input_messages == [{"role": "user", "content": "from the old format"}]


def test_absurdly_nested_message_json_keeps_the_call_without_messages():
    nested = '[{"type": "text", "content": ' * 400 + '"x"' + "}]" * 400
    attributes = {
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": '[{"role": "user", "parts": ' + nested + "}]",
    }

    call = parse_llm_call(attributes)

    assert call.model == "m" and call.input_messages == []


def test_token_counts_no_integer_column_can_hold_are_skipped_like_missing_ones():
    call = parse_llm_call(
        {
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 2**31,  # past int32: skipped, the older key is read
            "gen_ai.usage.prompt_tokens": 7,
            "gen_ai.usage.output_tokens": 2**31 - 1,
            "llm.usage.total_tokens": "9" * 18,
        }
    )
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (7, 2**31 - 1, None)

    call = parse_llm_call(
        {
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 2**31 - 1,
            "gen_ai.usage.output_tokens": 1,
        }
    )
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (2**31 - 1, 1, None)


def test_spans_that_are_not_llm_calls_give_none():
    spans = spans_by_name("sdk_batch.json")

    assert parse_llm_call(spans["answer the question.workflow"].attributes) is None
    assert parse_llm_call(spans["POST"].attributes) is None
    assert parse_llm_call({}) is None


# -- Sessions, kinds, names ---------------------------------------------------------


def test_the_session_id_comes_from_the_association_property_first():
    attributes = {
        "gen_ai.conversation.id": "conversation",
        "session.id": "session",
        "traceloop.association.properties.session_id": "association",
    }

    assert session_id_of(attributes, {}) == "association"
    del attributes["traceloop.association.properties.session_id"]
    assert session_id_of(attributes, {}) == "session"
    del attributes["session.id"]
    assert session_id_of(attributes, {}) == "conversation"
    del attributes["gen_ai.conversation.id"]
    assert session_id_of(attributes, {}) is None


def test_the_session_id_falls_back_to_resource_attributes_and_skips_blank_values():
    assert session_id_of({}, {"session.id": "from-resource"}) == "from-resource"
    assert session_id_of({"session.id": "span"}, {"session.id": "resource"}) == "span"
    assert (
        session_id_of(
            {"traceloop.association.properties.session_id": "  ", "session.id": "next"}, None
        )
        == "next"
    )
    assert session_id_of({"session.id": 42}, {}) == "42"
    assert session_id_of({"session.id": True}, {}) is None
    assert session_id_of({"session.id": "x" * 300}, {}) == "x" * 255


def test_span_kind_and_entity_name_come_from_traceloop_attributes():
    workflow = spans_by_name("sdk_batch.json")["answer the question.workflow"]

    assert span_kind_of(workflow.attributes) == "workflow"
    assert entity_name_of(workflow.attributes, workflow.name) == "answer the question"
    assert span_kind_of({"traceloop.span.kind": "Tool"}) == "tool"
    assert span_kind_of({"traceloop.span.kind": "unknown"}) is None
    assert entity_name_of({"traceloop.span.kind": "task"}, "fetch.task") == "fetch"
    assert entity_name_of({}, "openai.chat") == "openai.chat"


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


# -- Hostile input never escapes as anything but a refusal ---------------------------

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.sampled_from(
        ["5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "1700000000000000000"]
    )
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=25,
)
any_values = st.recursive(
    st.one_of(
        st.fixed_dictionaries({"stringValue": json_leaves}),
        st.fixed_dictionaries({"intValue": json_leaves}),
        st.fixed_dictionaries({"doubleValue": json_leaves}),
        st.fixed_dictionaries({"boolValue": json_leaves}),
        st.fixed_dictionaries({"bytesValue": json_leaves}),
        json_values,
    ),
    lambda children: (
        st.fixed_dictionaries(
            {"arrayValue": st.fixed_dictionaries({"values": st.lists(children, max_size=3)})}
        )
        | st.fixed_dictionaries(
            {
                "kvlistValue": st.fixed_dictionaries(
                    {
                        "values": st.lists(
                            st.fixed_dictionaries({"key": st.text(max_size=5), "value": children}),
                            max_size=3,
                        )
                    }
                )
            }
        )
    ),
    max_leaves=20,
)
attribute_lists = (
    st.lists(
        st.fixed_dictionaries({"key": st.text(max_size=10) | json_leaves, "value": any_values}),
        max_size=5,
    )
    | json_values
)
span_fields = {
    "traceId": json_leaves,
    "spanId": json_leaves,
    "parentSpanId": json_leaves,
    "name": json_leaves,
    "kind": json_leaves | st.integers(0, 6),
    "startTimeUnixNano": json_leaves,
    "endTimeUnixNano": json_leaves,
    "attributes": attribute_lists,
    "events": st.lists(
        st.fixed_dictionaries({"name": json_leaves, "attributes": attribute_lists}), max_size=2
    )
    | json_values,
    "status": st.fixed_dictionaries({"code": json_leaves, "message": json_leaves}) | json_values,
}
valid_ish_spans = st.builds(
    lambda overrides: span_doc(**overrides),
    st.fixed_dictionaries({}, optional=span_fields)
    | st.fixed_dictionaries(
        {
            "attributes": st.lists(
                st.fixed_dictionaries({"key": st.text(max_size=10), "value": any_values}),
                max_size=5,
            )
        }
    ),
)
otlp_shaped = st.fixed_dictionaries(
    {
        "resourceSpans": st.lists(
            st.fixed_dictionaries(
                {
                    "resource": st.fixed_dictionaries({"attributes": attribute_lists})
                    | json_values,
                    "scopeSpans": st.lists(
                        st.fixed_dictionaries(
                            {
                                "scope": st.fixed_dictionaries({"name": json_leaves}) | json_values,
                                "spans": st.lists(
                                    valid_ish_spans
                                    | st.fixed_dictionaries({}, optional=span_fields)
                                    | json_values,
                                    max_size=4,
                                ),
                            }
                        ),
                        max_size=2,
                    ),
                }
            ),
            max_size=2,
        )
    }
)


def assert_storable(batch) -> None:
    """Every decoded span is plain data PostgreSQL jsonb accepts, with sane ids and times."""
    for span in batch.spans:
        assert len(span.trace_id) == 32 and len(span.span_id) == 16
        assert len(span.parent_span_id) in (0, 16)
        assert 0 < span.start_ns <= span.end_ns < 2**64
        data = {
            "a": span.attributes,
            "e": span.events,
            "r": span.resource_attributes,
            "n": span.name,
        }
        text = json.dumps(data, allow_nan=False)
        assert "\\u0000" not in text
        text.encode("utf-8")
        parse_llm_call(span.attributes)
        session_id_of(span.attributes, span.resource_attributes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.binary(max_size=300),
    content_type=st.sampled_from([JSON, PROTOBUF, "text/plain"]),
    encoding=st.sampled_from([None, "gzip", "deflate", "identity", "br"]),
)
def test_random_bytes_only_ever_raise_a_refusal(body, content_type, encoding):
    try:
        batch = decode_request(body, content_type, encoding, max_bytes=1000)
    except REFUSALS:
        return
    assert_storable(batch)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=json_values | otlp_shaped)
def test_random_json_structures_only_ever_raise_a_refusal(document):
    body = json.dumps(document).encode()
    try:
        batch = decode_request(body, JSON, None, max_spans=6)
    except REFUSALS:
        return
    assert_storable(batch)
    total = sum(
        len(ss.get("spans") or [])
        for rs in document.get("resourceSpans") or []
        for ss in rs.get("scopeSpans") or []
    )
    assert len(batch.spans) + batch.rejected == total


@settings(max_examples=200, deadline=None)
@given(document=otlp_shaped, cut=st.integers(min_value=0, max_value=400))
def test_truncated_or_gzipped_otlp_json_only_ever_raises_a_refusal(document, cut):
    body = json.dumps(document).encode()
    for candidate in (body[:cut], gzip.compress(body)[:cut], gzip.compress(body)):
        try:
            assert_storable(
                decode_request(candidate, JSON, "gzip" if candidate[:2] == b"\x1f\x8b" else None)
            )
        except REFUSALS:
            pass


@settings(max_examples=300, deadline=None)
@given(
    document=otlp_shaped,
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=4),
)
def test_corrupted_protobuf_only_ever_raises_a_refusal(document, flips):
    try:
        body = bytearray(to_protobuf(json.loads(json.dumps(document))))
    except Exception:  # json_format refuses what is not a valid request; nothing to corrupt
        return
    for position, byte in flips:
        if body:
            body[position % len(body)] = byte
    try:
        assert_storable(decode_request(bytes(body), PROTOBUF, None))
    except REFUSALS:
        pass


LLM_KEYS = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.1.role",
    "gen_ai.prompt.x.role",
    "gen_ai.completion.0.tool_calls.0.name",
    "gen_ai.completion.0.tool_calls.x.arguments",
    "gen_ai.completion.0.finish_reason",
    "gen_ai.usage.input_tokens",
    "llm.usage.total_tokens",
    "gen_ai.request.model",
    "gen_ai.response.finish_reasons",
    "traceloop.span.kind",
    "traceloop.entity.name",
    "session.id",
]


@settings(max_examples=300, deadline=None)
@given(
    attributes=st.dictionaries(
        st.sampled_from(LLM_KEYS),
        json_values | json_values.map(json.dumps),
        max_size=8,
    )
)
def test_attribute_readers_never_raise_on_odd_values(attributes):
    call = parse_llm_call(attributes)
    if call is not None:
        assert all(
            set(m) == {"role", "content"} for m in call.input_messages + call.output_messages
        )
        assert all(
            isinstance(m["content"], str) for m in call.input_messages + call.output_messages
        )
    session_id_of(attributes, attributes)
    span_kind_of(attributes)
    assert isinstance(entity_name_of(attributes, "name"), str)


def test_every_refusal_is_an_otlp_error():
    assert all(issubclass(error, OtlpError) for error in REFUSALS)
