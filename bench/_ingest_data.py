"""Payloads for bench/ingest.py: the SDK-captured batch replicated into OTLP/JSON bodies of
SPANS_PER_BATCH spans with fresh ids, their span mix, and the parse-only rate over them."""

from __future__ import annotations

import copy
import itertools
import json
import random
import time

import _common

FIXTURE = _common.ROOT / "tests" / "traces" / "fixtures" / "sdk_batch.json"
SESSION_KEY = "traceloop.association.properties.session_id"
SPANS_PER_BATCH = 100


def make_payloads(count: int, sessions: int, seed: int = 7) -> list[bytes]:
    """`count` OTLP/JSON bodies of SPANS_PER_BATCH spans each, shaped like the SDK's."""
    fixture = json.loads(FIXTURE.read_text())
    resource_spans = fixture["resourceSpans"][0]
    scopes = [s["scope"] for s in resource_spans["scopeSpans"]]
    templates = [
        (index, span)
        for index, scope_spans in enumerate(resource_spans["scopeSpans"])
        for span in scope_spans["spans"]
    ]
    first_ns = min(int(span["startTimeUnixNano"]) for _, span in templates)
    salt = random.Random(seed).getrandbits(32)
    base_ns = time.time_ns() - 3600 * 10**9
    ids = itertools.count(1)
    payloads = []
    span_no = 0
    trace_map: dict[str, str] = {}
    span_map: dict[str, str] = {}
    session = ""
    offset = 0
    for _ in range(count):
        by_scope: dict[int, list] = {}
        for _ in range(SPANS_PER_BATCH):
            k = span_no % len(templates)
            if k == 0:  # a new replica of the fixture: new traces, new ids, next session
                replica = span_no // len(templates)
                trace_map, span_map = {}, {}
                session = f"bench-session-{replica % sessions}"
                offset = replica * 10**8  # 0.1 s apart
            span_no += 1
            scope_index, template = templates[k]
            span = copy.deepcopy(template)
            if span["traceId"] not in trace_map:
                trace_map[span["traceId"]] = f"{salt:08x}{next(ids):024x}"
            span["traceId"] = trace_map[span["traceId"]]
            for field in ("spanId", "parentSpanId"):
                if span.get(field):
                    if span[field] not in span_map:
                        span_map[span[field]] = f"{salt:08x}{next(ids):08x}"
                    span[field] = span_map[span[field]]
            for field in ("startTimeUnixNano", "endTimeUnixNano"):
                span[field] = str(int(span[field]) - first_ns + base_ns + offset)
            for event in span.get("events", []):
                event["timeUnixNano"] = str(
                    int(event["timeUnixNano"]) - first_ns + base_ns + offset
                )
            for attribute in span["attributes"]:
                if attribute["key"] == SESSION_KEY:
                    attribute["value"] = {"stringValue": session}
            by_scope.setdefault(scope_index, []).append(span)
        body = {
            "resourceSpans": [
                {
                    "resource": resource_spans["resource"],
                    "scopeSpans": [
                        {"scope": scopes[i], "spans": spans}
                        for i, spans in sorted(by_scope.items())
                    ],
                }
            ]
        }
        payloads.append(json.dumps(body).encode())  # ASCII, like the SDK's json.dumps
    return payloads


def mix_of(payload: bytes) -> dict[str, int]:
    from traces import otlp

    mix = {"llm": 0, "workflow": 0, "other": 0}
    for span in otlp.decode_request(payload, "application/json").spans:
        if otlp.parse_llm_call(span.attributes):
            mix["llm"] += 1
        elif otlp.span_kind_of(span.attributes) == "workflow":
            mix["workflow"] += 1
        else:
            mix["other"] += 1
    return mix


def parse_only(payloads: list[bytes]) -> tuple[float, int]:
    """Spans per second through decode_request + parse_llm_call + session_id_of."""
    from traces import otlp

    spans = 0
    started = time.perf_counter()
    for payload in payloads:
        batch = otlp.decode_request(payload, "application/json")
        for span in batch.spans:
            otlp.parse_llm_call(span.attributes)
            otlp.session_id_of(span.attributes, span.resource_attributes)
        spans += len(batch.spans)
    return spans / (time.perf_counter() - started), spans
