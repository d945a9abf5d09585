"""OTLP decoding: what is read from spans (lenient readings, LLM calls in both attribute
formats, sessions, span kinds and entity names). Pure Python, no database.
"""

from __future__ import annotations

import base64
import json
import math

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from tests.traces.helpers import (
    JSON,
    PROTOBUF,
    decode_json,
    encode_json,
    fixture_bytes,
    request_doc,
    span_doc,
    to_protobuf,
)
from traces.otlp import (
    TRUNCATION_MARKER,
    OtlpDecodeError,
    decode_request,
    entity_name_of,
    parse_llm_call,
    session_id_of,
    span_kind_of,
)

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


def test_an_integer_double_past_the_double_s_range_reads_as_infinity():
    big = [{"key": k, "value": {"doubleValue": v}} for k, v in (("a", 10**400), ("b", -(10**400)))]

    (decoded,) = decode_json(request_doc(span_doc(attributes=big))).spans

    # as the text 1e400 reads (a float past the range); before: OverflowError, a 500
    assert decoded.attributes == {"a": "Infinity", "b": "-Infinity"}


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


# -- Where orjson and the standard library read JSON differently, the latter's reading stands --


def test_a_byte_order_mark_before_the_json_is_skipped():
    body = encode_json(request_doc(span_doc()))

    (plain,) = decode_request(b"\xef\xbb\xbf" + body, JSON, None).spans

    assert plain.attributes == {"gen_ai.request.model": "gpt-4o"}


@pytest.mark.parametrize(
    ("number", "stored"),
    [
        (b"-9223372036854775808", -(2**63)),  # int64's least: kept
        (b"18446744073709551615", None),  # past int64: rejected
        (b"-9223372036854775809", None),  # orjson alone would round this to int64's least
        (b"-99999999999999999999999", None),
    ],
)
def test_int_values_sent_as_json_numbers_are_read_exactly(number, stored):
    body = encode_json(request_doc(span_doc(attributes=[]))).replace(
        b'"attributes": []', b'"attributes": [{"key": "n", "value": {"intValue": ' + number + b"}}]"
    )

    batch = decode_request(body, JSON, None)

    if stored is None:
        assert (batch.spans, batch.rejected) == ([], 1)
        assert "out of range" in batch.errors[0]
    else:
        assert batch.spans[0].attributes == {"n": stored}


def test_message_json_that_only_the_standard_library_reads_still_gives_the_messages():
    call = parse_llm_call(
        {
            "gen_ai.request.model": "m",
            # NaN and a 20-digit integer: orjson refuses the one and makes a float of the other
            "gen_ai.input.messages": '[{"role": "user", "content": {"x": NaN}}]',
            "gen_ai.output.messages": '[{"role": "assistant", "content": {"n": 123456789012345678901}}]',
        }
    )

    assert call.input_messages == [{"role": "user", "content": '{"x": NaN}'}]
    assert call.output_messages == [
        {"role": "assistant", "content": '{"n": 123456789012345678901}'}
    ]
