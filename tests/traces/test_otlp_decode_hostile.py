"""OTLP decoding of hostile input: never anything but a refusal (property tests).
Pure Python, no database.
"""

from __future__ import annotations

import gzip
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.hypothesis_profiles import examples
from tests.traces.helpers import (
    JSON,
    PROTOBUF,
    REFUSALS,
    span_doc,
    to_protobuf,
)
from traces.otlp import (
    OtlpError,
    decode_request,
    entity_name_of,
    parse_llm_call,
    session_id_of,
    span_kind_of,
)

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


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=examples(200), deadline=None)
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


@settings(max_examples=examples(300), deadline=None)
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


@settings(max_examples=examples(300), deadline=None)
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
