"""Hostile input against the real endpoint: never a 5xx, and a refused batch writes nothing.

Property tests (hypothesis) post malformed JSON, random JSON structures, random and corrupted
protobuf, wrong types, huge and deeply nested values, bad ids and duplicate spans through the
Django test client to POST /api/v1/traces on PostgreSQL, and check after each request:

* the status is never 5xx (the database is up and no slot is taken, so not even a 503);
* a 400/413/415 leaves the Span and Session tables exactly as they were;
* a 200 answers in the request's encoding, and rejects at most the spans that were sent.
"""

import gzip
import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.traces.conftest import (
    JSON,
    PROTOBUF,
    T0,
    attr,
    body_of,
    fixture_bytes,
    fixture_doc,
    post_outcome,
    post_traces,
    span,
    to_protobuf,
)
from traces.models import Session, Span

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=150,
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


# --- explicit hostile cases ---------------------------------------------------------------------------


def test_json_nested_past_the_parsers_limit_is_a_400(owner):
    response = post_traces(
        owner.key, b'{"resourceSpans": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    )

    assert response.status_code == 400
    assert counts() == (0, 0)


def test_an_attribute_nested_past_the_limit_rejects_only_its_span(owner):
    deep = span("deep", attributes={"session.id": "deep"})
    deep["attributes"].append({"key": "deep", "value": nested_array(50, {"stringValue": "x"})})
    fine = span("fine", attributes={"session.id": "deep"})
    fine["attributes"].append({"key": "nested", "value": nested_array(10, {"intValue": "1"})})

    response = post_traces(owner.key, body_of(deep, fine))

    assert response.status_code == 200
    assert json.loads(response.content)["partialSuccess"]["rejectedSpans"] == "1"
    assert list(Span.objects.values_list("name", flat=True)) == ["fine"]


def test_message_json_nested_absurdly_deep_keeps_the_call_without_messages(owner):
    attributes = {
        "session.id": "deep-messages",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": "[" * 100_000 + "]" * 100_000,
    }
    response = post_traces(owner.key, body_of(span("openai.chat", attributes=attributes)))

    assert response.status_code == 200
    call = Span.objects.get()
    assert call.is_llm and call.input_messages == [] and call.model == "m"


def test_huge_attribute_values_are_stored_truncated(owner):
    prompt = "p" * 1_500_000
    response = post_traces(
        owner.key,
        body_of(
            span(
                "openai.chat",
                attributes={
                    "session.id": "huge",
                    "gen_ai.prompt.0.content": prompt,
                    "gen_ai.request.model": "m",
                },
            )
        ),
    )

    assert response.status_code == 200
    stored = Span.objects.get()
    value = stored.attributes["gen_ai.prompt.0.content"]
    assert len(value) < len(prompt) and value.endswith("…[truncated]")


def test_nul_and_lone_surrogates_everywhere_are_stored_replaced(owner):
    nasty = "a\x00b\ud800c"
    doc = body_of(
        span(
            nasty,
            attributes={
                "session.id": f"s{nasty}",
                f"key{nasty}": nasty,
                "gen_ai.prompt.0.content": nasty,
            },
        ),
        resource={"service.name": nasty},
    )
    doc["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"] = nasty
    response = post_traces(owner.key, json.dumps(doc).encode())

    assert response.status_code == 200, response.content
    stored = Span.objects.get()
    assert stored.name == "a\ufffdb\ufffdc"
    assert stored.session.external_id == "sa\ufffdb\ufffdc"
    assert stored.attributes["key" + "a\ufffdb\ufffdc"] == "a\ufffdb\ufffdc"
    # The SDK reports the outcome with the id it used: it finds the stored session.
    assert (
        post_outcome(owner.key, {"session_id": f"s{nasty}", "outcome": "success"}).status_code
        == 200
    )


def test_duplicate_spans_within_a_batch_are_stored_once(owner):
    one = span("first", attributes={"session.id": "dup"})
    twin = dict(one, name="second copy")

    response = post_traces(owner.key, body_of(one, twin, one))

    assert response.status_code == 200
    assert Span.objects.count() == 1
    assert Session.objects.get().span_count == 1


def test_every_kind_of_bad_id_is_a_rejected_span_not_an_error(owner):
    bad = ["", "0" * 32, "xyz", 12345, None, "5b8efff798038103d269b633813fc60c00", [1, 2]]
    spans_ = [dict(span("bad"), traceId=value) for value in bad] + [
        dict(span("bad"), spanId=value) for value in bad
    ]
    spans_.append(span("good", attributes={"session.id": "ids"}))

    response = post_traces(owner.key, body_of(*spans_))

    assert response.status_code == 200
    assert json.loads(response.content)["partialSuccess"]["rejectedSpans"] == str(len(spans_) - 1)
    assert list(Span.objects.values_list("name", flat=True)) == ["good"]


def test_wrong_value_types_reject_their_span_only(owner):
    wrong = [
        {"key": "a", "value": {"intValue": "twelve"}},
        {"key": "b", "value": {"boolValue": "yes"}},
        {"key": "c", "value": {"doubleValue": [1]}},
        {"key": "d", "value": "not an AnyValue"},
        {"key": 5, "value": {"stringValue": "x"}},
        {"key": "f", "value": {"stringValue": "x", "intValue": "1"}},
    ]
    spans_ = [span(f"wrong {i}", attributes={"session.id": "types"}) for i in range(len(wrong))]
    for s, a in zip(spans_, wrong, strict=True):
        s["attributes"].append(a)
    spans_.append(
        span("ok", attributes={"session.id": "types", "n": 3, "f": 1.5, "b": True, "l": ["x", 1]})
    )

    response = post_traces(owner.key, body_of(*spans_))

    assert response.status_code == 200
    assert json.loads(response.content)["partialSuccess"]["rejectedSpans"] == str(len(wrong))
    assert Span.objects.get().attributes == {
        "session.id": "types",
        "n": 3,
        "f": 1.5,
        "b": True,
        "l": ["x", 1],
    }


def test_extreme_numbers_and_times_are_stored_or_rejected_not_an_error(owner):
    spans_ = [
        span("far future", attributes={"session.id": "num"})
        | {"startTimeUnixNano": str(2**64 - 2), "endTimeUnixNano": str(2**64 - 1)},
        span("epoch", attributes={"session.id": "num"})
        | {"startTimeUnixNano": "1", "endTimeUnixNano": "2"},
        span("too far", attributes={"session.id": "num"}) | {"endTimeUnixNano": str(2**64)},
        span(
            "tokens",
            attributes={
                "session.id": "num",
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 2**63 - 1,
                "gen_ai.usage.output_tokens": -5,
            },
        ),
        span("doubles", attributes={"session.id": "num"}),
    ]
    spans_[-1]["attributes"] += [
        attr("nan", float("nan")),
        attr("inf", float("inf")),
        attr("big", 1e308),
    ]

    response = post_traces(owner.key, json.dumps(body_of(*spans_)).encode())

    assert response.status_code == 200, response.content
    assert json.loads(response.content)["partialSuccess"]["rejectedSpans"] == "1"
    assert Span.objects.count() == 4
    doubles = Span.objects.get(name="doubles").attributes
    assert (doubles["nan"], doubles["inf"], float(doubles["big"])) == ("NaN", "Infinity", 1e308)
    tokens = Span.objects.get(name="tokens")
    assert tokens.input_tokens is None and tokens.output_tokens is None


def test_a_gzip_bomb_is_a_413_without_a_write(owner):
    bomb = gzip.compress(b"{" + b" " * (50 * 1024 * 1024) + b"}", compresslevel=9)

    response = post_traces(owner.key, bomb, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert counts() == (0, 0)
