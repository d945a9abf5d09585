"""Explicit hostile cases against the real endpoint: never a 5xx, and a refused batch writes
nothing (the property tests are in test_ingest_fuzz.py).
"""

import gzip
import json

import pytest

from tests.traces.fuzz import (
    counts,
    nested_array,
)
from tests.traces.helpers import (
    attr,
    body_of,
    post_outcome,
    post_traces,
    span,
)
from traces.models import Session, Span

pytestmark = pytest.mark.django_db


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
