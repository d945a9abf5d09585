"""Hypothesis strategies and checks for fuzzing POST /api/v1/traces (tests/traces/test_ingest_fuzz.py)."""

import json

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.helpers.hypothesis_profiles import examples
from tests.traces.helpers import (
    JSON,
    PROTOBUF,
    T0,
)
from traces.models import Session, Span

FUZZ = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
REFUSED = (400, 413, 415)


def counts() -> tuple[int, int]:
    return Span.objects.count(), Session.objects.count()


def spans_in(document) -> int:
    """How many spans a JSON document carries where OTLP puts them (0 if it is not OTLP)."""
    try:
        return sum(
            len(ss.get("spans") or [])
            for rs in document.get("resourceSpans") or []
            for ss in rs.get("scopeSpans") or []
        )
    except (AttributeError, TypeError):
        return 0


def check(response, before: tuple[int, int], content_type: str, sent: int | None = None) -> None:
    status = response.status_code
    event(f"HTTP {status}")
    assert status < 500, (status, response.content[:500])
    if status in REFUSED:
        assert counts() == before, f"a {status} wrote rows"
        return
    assert status == 200, (status, response.content[:500])
    if content_type == PROTOBUF:
        assert response["Content-Type"] == PROTOBUF
        rejected = ExportTraceServiceResponse.FromString(
            response.content
        ).partial_success.rejected_spans
    else:
        assert response["Content-Type"] == JSON
        answer = json.loads(response.content)
        assert set(answer) <= {"partialSuccess"}
        rejected = int(answer.get("partialSuccess", {}).get("rejectedSpans", "0"))
    added = counts()[0] - before[0]
    event("stored new spans" if added else "stored no new span")
    event("some spans rejected" if rejected else "no span rejected")
    if sent is not None:
        assert rejected <= sent
        assert added <= sent - rejected


# --- strategies ----------------------------------------------------------------------------------

# Fresh ids, and ids from small pools so spans collide within a batch and with earlier examples.
good_trace_ids = st.integers(1, 2**64).map(lambda n: f"{n:032x}") | st.sampled_from(
    ["5b8efff798038103d269b633813fc60c", "0af7651916cd43dd8448eb211c80319c"]
)
good_span_ids = st.integers(1, 2**60).map(lambda n: f"{n:016x}") | st.sampled_from(
    ["eee19b7ec3c1b174", "b7ad6b7169203331", "00f067aa0ba902b7", "53995c3f42cd8ad8"]
)
bad_ids = st.one_of(
    st.sampled_from(
        ["", "0" * 32, "0" * 16, "xyz", "5b8efff798038103d269b633813fc60c00", "AAAAAAAAAAA="]
    ),
    st.text(max_size=40),
    st.integers(),
    st.none(),
    st.lists(st.integers(0, 255), max_size=3),
)
odd_text = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        ["\x00", "a\x00b", "\ud800", "\udfff tail", "😀", "\u202e", " ", "run_" + "x" * 20]
    ),
    st.just("h" * 300),
)
huge_text = st.sampled_from([10_000, 300_000, 1_000_001]).map(lambda n: "z" * n)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1", "-5", "9" * 25, "1e3", "NaN", "Infinity", "0x10", ""]),
)
leaves = st.one_of(st.none(), st.booleans(), numbers, odd_text)
plain_json = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


def nested_array(depth: int, inner: dict) -> dict:
    value = inner
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


any_value = st.recursive(
    st.one_of(
        st.builds(lambda v: {"stringValue": v}, odd_text | leaves),
        st.builds(lambda v: {"intValue": v}, numbers | leaves),
        st.builds(lambda v: {"doubleValue": v}, numbers | leaves),
        st.builds(lambda v: {"boolValue": v}, leaves),
        st.builds(
            lambda v: {"bytesValue": v}, st.sampled_from(["AAEC", "!!", "", "aGVsbG8="]) | leaves
        ),
        st.builds(lambda v: {"stringValue": v}, huge_text),
        st.builds(lambda d: nested_array(d, {"stringValue": "deep"}), st.integers(10, 40)),
        plain_json,
    ),
    lambda children: st.one_of(
        st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(children, max_size=3)),
        st.builds(
            lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
            st.lists(st.tuples(st.text(max_size=5), children), max_size=3),
        ),
    ),
    max_leaves=8,
)
interesting_keys = st.sampled_from(
    [
        "traceloop.association.properties.session_id",
        "session.id",
        "gen_ai.conversation.id",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.prompt.0.content",
        "gen_ai.prompt.0.role",
        "gen_ai.completion.0.content",
        "gen_ai.completion.0.tool_calls.0.arguments",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.usage.total_tokens",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "traceloop.span.kind",
        "traceloop.entity.name",
    ]
)
message_json = st.one_of(
    plain_json.map(json.dumps),
    st.just("[" * 5000 + "]" * 5000),
    st.builds(
        lambda role, content: json.dumps(
            [{"role": role, "parts": [{"type": "text", "content": content}]}]
        ),
        leaves,
        leaves,
    ),
)
attributes = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {
                "key": interesting_keys | st.text(max_size=12) | leaves,
                "value": any_value | message_json.map(lambda s: {"stringValue": s}),
            }
        ),
        max_size=6,
    ),
    plain_json,
)
times = st.one_of(
    st.integers(0, 10_000).map(lambda ms: str(T0 + ms * 1_000_000)),
    numbers,
    leaves,
)
spans = st.builds(
    lambda base, overrides: {**base, **overrides},
    st.fixed_dictionaries(
        {
            "traceId": good_trace_ids,
            "spanId": good_span_ids,
            "name": st.text(max_size=30),
            "startTimeUnixNano": st.just(str(T0)),
            "endTimeUnixNano": st.integers(0, 10_000).map(lambda ms: str(T0 + ms * 1_000_000)),
        }
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "traceId": good_trace_ids | bad_ids,
            "spanId": good_span_ids | bad_ids,
            "parentSpanId": good_span_ids | bad_ids,
            "name": odd_text | leaves | huge_text,
            "kind": st.integers(-2, 9) | leaves,
            "startTimeUnixNano": times,
            "endTimeUnixNano": times,
            "attributes": attributes,
            "events": st.lists(
                st.fixed_dictionaries(
                    {"name": odd_text | leaves, "timeUnixNano": times, "attributes": attributes}
                ),
                max_size=2,
            )
            | plain_json,
            "status": st.fixed_dictionaries(
                {}, optional={"code": st.integers(-1, 5) | leaves, "message": odd_text | leaves}
            )
            | plain_json,
        },
    ),
)
# Spans that are valid but for their content: these reach the database.
hostile_spans = st.builds(
    lambda base, overrides: {**base, **overrides},
    st.fixed_dictionaries(
        {
            "traceId": good_trace_ids,
            "spanId": good_span_ids,
            "name": st.text(max_size=30),
            "kind": st.integers(0, 5),
            "startTimeUnixNano": st.just(str(T0)),
            "endTimeUnixNano": st.integers(0, 10_000).map(lambda ms: str(T0 + ms * 1_000_000)),
            "attributes": st.lists(
                st.fixed_dictionaries(
                    {
                        "key": interesting_keys | st.text(max_size=12),
                        "value": any_value | message_json.map(lambda s: {"stringValue": s}),
                    }
                ),
                max_size=6,
            ),
        }
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "parentSpanId": good_span_ids,
            "name": odd_text | huge_text,
            "events": st.lists(
                st.fixed_dictionaries(
                    {"name": odd_text, "timeUnixNano": st.just(str(T0)), "attributes": st.just([])}
                ),
                max_size=2,
            ),
            "status": st.fixed_dictionaries({"code": st.integers(0, 2), "message": odd_text}),
        },
    ),
)


def with_duplicates(spans_: list[dict], twice: bool) -> list[dict]:
    return spans_ + [dict(spans_[0], name="the same ids again")] if twice else spans_


def document_of(spans_: list[dict], resource: list[dict]) -> dict:
    scope = {"scope": {"name": "fuzz"}, "spans": spans_}
    return {"resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [scope]}]}


hostile_documents = st.builds(
    document_of,
    st.builds(with_duplicates, st.lists(hostile_spans, min_size=1, max_size=6), st.booleans()),
    st.lists(st.fixed_dictionaries({"key": interesting_keys, "value": any_value}), max_size=3),
)

documents = st.fixed_dictionaries(
    {
        "resourceSpans": st.lists(
            st.fixed_dictionaries(
                {
                    "resource": st.fixed_dictionaries({"attributes": attributes}) | plain_json,
                    "scopeSpans": st.lists(
                        st.fixed_dictionaries(
                            {
                                "scope": st.fixed_dictionaries({"name": odd_text | leaves})
                                | plain_json,
                                "spans": st.lists(spans | plain_json, max_size=5),
                            }
                        ),
                        max_size=2,
                    ),
                }
            ),
            min_size=1,
            max_size=2,
        )
    }
)


def encode(document) -> bytes:
    # ensure_ascii=True is what the SDK does; it also turns lone surrogates into \u escapes.
    return json.dumps(document, allow_nan=True).encode()
