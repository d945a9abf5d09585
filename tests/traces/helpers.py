"""Trace test helpers: OTLP bodies (the SDK's captures, hand-built JSON and protobuf) and posting
them to the real endpoint."""

import copy
import gzip
import itertools
import json
from pathlib import Path

from django.test import Client
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from traces import models
from traces.otlp import (
    OtlpDecodeError,
    PayloadTooLarge,
    TooManySpans,
    UnsupportedMediaType,
    decode_request,
)

FIXTURES = Path(__file__).parent / "fixtures"
JSON = "application/json"
PROTOBUF = "application/x-protobuf"
TRACES = "/api/v1/traces"
OUTCOMES = "/api/v1/outcomes"
T0 = 1_796_000_000_000_000_000  # ns; 2026-11-29
_ids = itertools.count(1)


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_doc(name: str) -> dict:
    return json.loads(fixture_bytes(name))


# --- OTLP/JSON built by hand ---------------------------------------------------------------


def attr(key: str, value) -> dict:
    """One OTLP/JSON attribute, typed like the SDK's exporter does it."""
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, list):
        return {
            "key": key,
            "value": {"arrayValue": {"values": [attr("", v)["value"] for v in value]}},
        }
    return {"key": key, "value": {"stringValue": value}}


def new_trace_id() -> str:
    return f"{0xABC0000000000000 + next(_ids):032x}"


def new_span_id() -> str:
    return f"{0x5000000000000000 + next(_ids):016x}"


def span(
    name: str = "step",
    *,
    trace_id: str | None = None,
    span_id: str | None = None,
    parent: str | None = None,
    attributes: dict | None = None,
    start: int = 0,
    duration_ms: float = 100,
    status: int = 0,
    kind: int = 1,
) -> dict:
    """A span as the belvedir SDK encodes it (hex ids, decimal-string times)."""
    begin = T0 + start * 1_000_000
    doc = {
        "traceId": trace_id or new_trace_id(),
        "spanId": span_id or new_span_id(),
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(begin),
        "endTimeUnixNano": str(begin + int(duration_ms * 1_000_000)),
        "attributes": [attr(k, v) for k, v in (attributes or {}).items()],
        "status": {"code": status},
    }
    if parent:
        doc["parentSpanId"] = parent
    return doc


def body_of(*spans: dict, resource: dict | None = None) -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr(k, v) for k, v in (resource or {}).items()]},
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": list(spans)}],
            }
        ]
    }


def llm_attributes(session_id: str, model: str = "gpt-4o-mini", **extra) -> dict:
    """A current-format OpenAI client call, as opentelemetry-instrumentation-openai writes it."""
    return {
        "traceloop.association.properties.session_id": session_id,
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "What is 2+2?"}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": "4"}],
                    "finish_reason": "stop",
                }
            ]
        ),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3,
        **extra,
    }


# --- OTLP/protobuf built with opentelemetry-proto ------------------------------------------


def any_value(value) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value)


def proto_span(
    name: str,
    *,
    trace_id: str,
    span_id: str,
    parent: str = "",
    attributes: dict | None = None,
    duration_ms: int = 50,
    status: int = 0,
) -> Span:
    return Span(
        trace_id=bytes.fromhex(trace_id),
        span_id=bytes.fromhex(span_id),
        parent_span_id=bytes.fromhex(parent) if parent else b"",
        name=name,
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=T0,
        end_time_unix_nano=T0 + duration_ms * 1_000_000,
        attributes=[KeyValue(key=k, value=any_value(v)) for k, v in (attributes or {}).items()],
        status=Status(code=status),
    )


def proto_body(*spans: Span, service: str = "otel-agent") -> bytes:
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(
                    attributes=[KeyValue(key="service.name", value=AnyValue(string_value=service))]
                ),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name="opentelemetry.instrumentation.openai"),
                        spans=list(spans),
                    )
                ],
            )
        ]
    )
    return request.SerializeToString()


def to_protobuf(document: dict) -> bytes:
    """The protobuf twin of an OTLP/JSON document (json_format wants base64 ids)."""
    import base64

    document = copy.deepcopy(document)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for s in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if s.get(key):
                        s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    return json_format.ParseDict(document, ExportTraceServiceRequest()).SerializeToString()


def _rpc_status_class():
    """google.rpc.Status, built here: googleapis-common-protos is not a dependency."""
    file = descriptor_pb2.FileDescriptorProto(
        name="tests_rpc_status.proto", package="tests.rpc", syntax="proto3"
    )
    message = file.message_type.add(name="Status")
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    message.field.add(
        name="code", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32, label=optional
    )
    message.field.add(
        name="message",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=optional,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tests.rpc.Status"))


RpcStatus = _rpc_status_class()


# --- posting ---------------------------------------------------------------------------------


def post_traces(
    key: str | None,
    body: bytes | dict,
    content_type: str = JSON,
    *,
    gzipped: bool = False,
    client: Client | None = None,
    **headers,
):
    """POST to /api/v1/traces as an exporter would: raw bytes, bearer key, maybe gzip."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    if gzipped:
        data = gzip.compress(data)
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    # The test client drops the content type of an empty body; a real exporter sends it.
    headers.setdefault("CONTENT_TYPE", content_type)
    return (client or Client()).post(TRACES, data=data, content_type=content_type, **headers)


def post_outcome(key: str | None, body, *, raw: bytes | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key is not None else {}
    data = raw if raw is not None else json.dumps(body).encode()
    return Client().post(OUTCOMES, data=data, content_type=JSON, **headers)


# --- reading the endpoint's answers ----------------------------------------------------------

MB = 1024 * 1024


def stored() -> tuple[int, int]:
    return models.Span.objects.count(), models.Session.objects.count()


def json_of(response) -> dict:
    assert response["Content-Type"] == JSON, response["Content-Type"]
    return json.loads(response.content)


def rpc_status_of(response):
    assert response["Content-Type"] == PROTOBUF, response["Content-Type"]
    return RpcStatus.FromString(response.content)


# --- decoding without the endpoint ---------------------------------------------------------

REFUSALS = (OtlpDecodeError, PayloadTooLarge, TooManySpans, UnsupportedMediaType)


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
