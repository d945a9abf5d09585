"""The OTLP/protobuf decoder: request bytes in, a :class:`DecodedBatch` out.

Called by :func:`traces.otlp.decode_request` once the body is within the size limits
and decompressed. Parses an ``ExportTraceServiceRequest`` and produces the same records
as :mod:`traces.otlp_json`. The protobuf parser has already typed every field, so what
is checked here is ids, timestamps, nesting depth, NUL characters, non-finite doubles
and string length.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from belvedir.validators import storable
from traces.otlp_base import (
    _KINDS,
    _STATUSES,
    _ZERO_IDS,
    MAX_VALUE_DEPTH,
    TRUNCATION_MARKER,
    DecodedBatch,
    OtlpDecodeError,
    SpanIn,
    TooManySpans,
    _double,
    _Reject,
)


class _ProtoDecoder:
    """Decodes ``ExportTraceServiceRequest`` protobuf into the same records as JSON."""

    def __init__(self, max_value_chars: int) -> None:
        self.max_chars = max_value_chars
        self.truncated = 0

    def decode(self, body: bytes, max_spans: int) -> DecodedBatch:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except (DecodeError, ValueError, RecursionError) as err:
            raise OtlpDecodeError(f"body is not a valid protobuf request: {err}") from None
        total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        if total > max_spans:
            raise TooManySpans(f"{total} spans in one request; the limit is {max_spans}")

        batch = DecodedBatch()
        index = 0
        for resource_spans in request.resource_spans:
            try:
                resource_attributes = self.attributes(resource_spans.resource.attributes)
            except _Reject as err:
                count = sum(len(ss.spans) for ss in resource_spans.scope_spans)
                if count:
                    batch._reject(index, str(err), count=count)
                index += count
                continue
            for scope_spans in resource_spans.scope_spans:
                scope_name = self.string(scope_spans.scope.name)
                for raw in scope_spans.spans:
                    try:
                        batch.spans.append(self.span(raw, resource_attributes, scope_name))
                    except _Reject as err:
                        batch._reject(index, str(err))
                    index += 1
        batch.truncated_values = self.truncated
        return batch

    def span(self, raw: Any, resource_attributes: dict, scope_name: str) -> SpanIn:
        trace_id = _proto_id(raw.trace_id, 16, "traceId")
        span_id = _proto_id(raw.span_id, 8, "spanId")
        parent_span_id = _proto_id(raw.parent_span_id, 8, "parentSpanId", optional=True)
        start_ns, end_ns = raw.start_time_unix_nano, raw.end_time_unix_nano
        if not start_ns or not end_ns:
            raise _Reject("missing startTimeUnixNano or endTimeUnixNano")
        if end_ns < start_ns:
            raise _Reject("endTimeUnixNano is before startTimeUnixNano")
        code = raw.status.code
        return SpanIn(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            name=self.string(raw.name),
            kind=_KINDS[raw.kind] if 0 <= raw.kind < len(_KINDS) else _KINDS[0],
            start_ns=start_ns,
            end_ns=end_ns,
            attributes=self.attributes(raw.attributes),
            events=[
                {
                    "name": self.string(event.name),
                    "time_ns": event.time_unix_nano,
                    "attributes": self.attributes(event.attributes),
                }
                for event in raw.events
            ],
            status_code=_STATUSES[code] if 0 <= code < len(_STATUSES) else _STATUSES[0],
            status_message=self.string(raw.status.message),
            resource_attributes=resource_attributes,
            scope_name=scope_name,
        )

    def attributes(self, pairs: Any, depth: int = 1) -> dict[str, Any]:
        return {self.string(pair.key): self.value(pair.value, depth, pair.key) for pair in pairs}

    def value(self, raw: Any, depth: int, key: str) -> Any:
        kind = raw.WhichOneof("value")
        if kind == "string_value":
            return self.string(raw.string_value)
        if kind == "int_value":
            return raw.int_value
        if kind == "bool_value":
            return raw.bool_value
        if kind == "double_value":
            return _double(raw.double_value, key)
        if kind == "array_value" or kind == "kvlist_value":
            if depth >= MAX_VALUE_DEPTH:
                raise _Reject(f"attribute {key!r}: nested deeper than {MAX_VALUE_DEPTH}")
            if kind == "array_value":
                return [self.value(item, depth + 1, key) for item in raw.array_value.values]
            return self.attributes(raw.kvlist_value.values, depth + 1)
        if kind == "bytes_value":
            return base64.b64encode(raw.bytes_value).decode()
        return None

    def string(self, value: str) -> str:
        if "\x00" in value:  # protobuf strings are valid UTF-8: no lone surrogates
            value = storable(value)
        if len(value) > self.max_chars:
            self.truncated += 1
            return value[: self.max_chars] + TRUNCATION_MARKER
        return value


def _proto_id(raw: bytes, size: int, what: str, *, optional: bool = False) -> str:
    if not raw:
        if optional:
            return ""
        raise _Reject(f"missing {what}")
    if len(raw) != size:
        raise _Reject(f"{what} is not {size} bytes")
    hex_id = raw.hex()
    if hex_id == _ZERO_IDS[size]:
        if optional:
            return ""
        raise _Reject(f"{what} is all zeros")
    return hex_id
