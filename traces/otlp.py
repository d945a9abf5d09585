"""OTLP/HTTP trace decoding: request bytes in, plain span records out.

No Django here. The ingest view calls :func:`decode_request` and
:func:`encode_response` (or :func:`encode_error`); the trace jobs call
:func:`parse_llm_call`, :func:`session_id_of`, :func:`span_kind_of` and
:func:`entity_name_of` (defined in :mod:`traces.semconv`, re-exported here).
What the ``belvedir`` SDK actually sends is written up in
``docs/sdk-wire-format.md``.

Limits and choices:

* The body is refused (413) when it is larger than ``max_bytes`` on the wire or
  after gunzip/inflate; inflation stops at ``max_bytes + 1`` bytes, so a zip bomb
  is never expanded in memory. More than ``max_spans`` spans is a 413 too.
* A body that cannot be decoded at all is a 400 (:class:`OtlpDecodeError`); a
  span that is wrong on its own (bad ids, missing or reversed timestamps, wrong
  value types, values nested deeper than ``MAX_VALUE_DEPTH``) is *rejected* and
  counted in :attr:`DecodedBatch.rejected`, and the other spans are kept.
* A string longer than ``max_value_chars`` is truncated and ends with
  ``TRUNCATION_MARKER`` (counted in :attr:`DecodedBatch.truncated_values`):
  a long prompt is worth keeping in part, rather than losing its whole span.
* Non-finite doubles (NaN, ±Infinity; Python's ``json.dumps`` writes them bare)
  become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` so the values
  stay storable as JSON. NUL characters and lone UTF-16 surrogates, which
  PostgreSQL text and jsonb refuse, are replaced with U+FFFD.
* Trace and span ids come back as lowercase hex. In JSON they are hex per the
  OTLP/JSON spec (what the SDK sends); base64 of the right length is accepted.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

# The attribute readers live in traces.semconv; they are part of this module's API too.
from traces.semconv import (
    LlmCall,
    entity_name_of,
    parse_llm_call,
    session_id_of,
    span_kind_of,
)

__all__ = [
    "DecodedBatch",
    "LlmCall",
    "OtlpDecodeError",
    "OtlpError",
    "PayloadTooLarge",
    "SpanIn",
    "TooManySpans",
    "UnsupportedMediaType",
    "decode_request",
    "encode_error",
    "encode_response",
    "entity_name_of",
    "media_type_of",
    "parse_llm_call",
    "session_id_of",
    "span_kind_of",
]

JSON_CONTENT_TYPE = "application/json"
PROTOBUF_CONTENT_TYPE = "application/x-protobuf"
_PROTOBUF_TYPES = frozenset({PROTOBUF_CONTENT_TYPE, "application/protobuf"})

MAX_BODY_BYTES = 5 * 1024 * 1024
MAX_SPANS = 1000
MAX_VALUE_DEPTH = 16
MAX_VALUE_CHARS = 1_000_000
MAX_ERRORS = 20
MAX_REASON_CHARS = 200
TRUNCATION_MARKER = "…[truncated]"

_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
_KIND_NAMES = {f"SPAN_KIND_{name.upper()}": name for name in _KINDS}
_STATUSES = ("unset", "ok", "error")
_STATUS_NAMES = {f"STATUS_CODE_{name.upper()}": name for name in _STATUSES}
_VALUE_KEYS = frozenset(
    {
        "stringValue",
        "boolValue",
        "intValue",
        "doubleValue",
        "arrayValue",
        "kvlistValue",
        "bytesValue",
    }
)
_HEX = {16: re.compile(r"[0-9a-fA-F]{32}"), 8: re.compile(r"[0-9a-fA-F]{16}")}
_ZERO_IDS = {16: "0" * 32, 8: "0" * 16}
_INT_RE = re.compile(r"-?[0-9]{1,20}")
_INT64 = 2**63
_UINT64 = 2**64
_NON_FINITE = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_MAX_GZIP_MEMBERS = 64


class OtlpError(Exception):
    """Base of the errors that refuse a whole request; ``http_status`` says how."""

    http_status = 400


class OtlpDecodeError(OtlpError):
    """The body cannot be decoded at all (HTTP 400)."""


class PayloadTooLarge(OtlpError):
    """The body is larger than allowed, before or after decompression (HTTP 413)."""

    http_status = 413


class TooManySpans(OtlpError):
    """The request carries more spans than allowed (HTTP 413)."""

    http_status = 413


class UnsupportedMediaType(OtlpError):
    """Unknown content type or content encoding (HTTP 415)."""

    http_status = 415


@dataclass(slots=True)
class SpanIn:
    """One decoded span. ``resource_attributes`` is shared by the spans of a resource."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    status_code: str
    status_message: str
    resource_attributes: dict[str, Any]
    scope_name: str


@dataclass(slots=True)
class DecodedBatch:
    """The spans that decoded, and how many were rejected and why."""

    spans: list[SpanIn] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)
    truncated_values: int = 0

    @property
    def error_message(self) -> str:
        """The rejection reasons in one line, for ``partialSuccess.errorMessage``."""
        message = "; ".join(self.errors)
        if self.rejected > len(self.errors):
            message += f" (and {self.rejected - len(self.errors)} more)"
        return message

    def _reject(self, index: int, reason: str, count: int = 1) -> None:
        self.rejected += count
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"span {index}: {reason[:MAX_REASON_CHARS]}")


class _Reject(Exception):
    """Raised inside span decoding: this span (or resource/scope) is rejected."""


# -- Request level -----------------------------------------------------------


def decode_request(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None = None,
    *,
    max_bytes: int = MAX_BODY_BYTES,
    max_spans: int = MAX_SPANS,
    max_value_chars: int = MAX_VALUE_CHARS,
) -> DecodedBatch:
    """Decode an OTLP/HTTP trace export request (JSON or protobuf, maybe gzipped)."""
    media_type = media_type_of(content_type)
    if media_type != JSON_CONTENT_TYPE and media_type not in _PROTOBUF_TYPES:
        raise UnsupportedMediaType(f"unsupported content type {media_type or '(none)'!r}")
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"body is larger than {max_bytes} bytes")
    body = _decompress(body, content_encoding, max_bytes)
    if media_type == JSON_CONTENT_TYPE:
        return _JsonDecoder(max_value_chars).decode(body, max_spans)
    return _ProtoDecoder(max_value_chars).decode(body, max_spans)


def media_type_of(content_type: str | None) -> str:
    """``"application/json; charset=utf-8"`` → ``"application/json"``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def _decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("gzip", "x-gzip") or (encoding in ("", "identity") and body[:2] == _GZIP_MAGIC):
        return _inflate(body, _GZIP_WBITS, max_bytes)
    if encoding == "deflate":
        # HTTP "deflate" is zlib-wrapped; some clients send raw deflate.
        wbits = zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS
        return _inflate(body, wbits, max_bytes)
    if encoding in ("", "identity"):
        return body
    raise UnsupportedMediaType(f"unsupported content encoding {encoding!r}")


def _inflate(data: bytes, wbits: int, max_bytes: int) -> bytes:
    """Inflate at most ``max_bytes`` (+1 to notice overflow); gzip members may repeat."""
    out: list[bytes] = []
    size = 0
    try:
        while True:
            if len(out) >= _MAX_GZIP_MEMBERS:
                raise OtlpDecodeError(f"more than {_MAX_GZIP_MEMBERS} gzip members")
            inflater = zlib.decompressobj(wbits)
            chunk = inflater.decompress(data, max_bytes - size + 1)
            size += len(chunk)
            out.append(chunk)
            if size > max_bytes or inflater.unconsumed_tail:
                raise PayloadTooLarge(f"body is larger than {max_bytes} bytes after decompression")
            if not inflater.eof:
                raise OtlpDecodeError("compressed body is truncated")
            data = inflater.unused_data
            if not data or wbits != _GZIP_WBITS or data[:2] != _GZIP_MAGIC:
                break
    except zlib.error as err:
        raise OtlpDecodeError(f"compressed body is corrupt: {err}") from None
    if data.strip(b"\x00"):
        raise OtlpDecodeError("trailing bytes after the compressed body")
    return b"".join(out)


def encode_response(
    content_type: str | None, *, rejected: int = 0, error_message: str = ""
) -> tuple[bytes, str]:
    """An ExportTraceServiceResponse in the request's encoding: ``(body, content type)``."""
    if media_type_of(content_type) in _PROTOBUF_TYPES:
        response = ExportTraceServiceResponse()
        if rejected or error_message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = error_message
        return response.SerializeToString(), PROTOBUF_CONTENT_TYPE
    document: dict[str, Any] = {}
    if rejected or error_message:
        partial: dict[str, str] = {}
        if rejected:
            partial["rejectedSpans"] = str(rejected)
        if error_message:
            partial["errorMessage"] = error_message
        document["partialSuccess"] = partial
    return json.dumps(document, separators=(",", ":")).encode(), JSON_CONTENT_TYPE


_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 413: 8, 415: 3, 429: 8, 503: 14}


def encode_error(content_type: str | None, *, http_status: int, message: str) -> tuple[bytes, str]:
    """A ``google.rpc.Status`` error body (what OTLP/HTTP specifies for 4xx/5xx)."""
    code = _GRPC_CODES.get(http_status, 2)
    if media_type_of(content_type) in _PROTOBUF_TYPES:
        text = message.encode()
        body = b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text
        return body, PROTOBUF_CONTENT_TYPE
    document = {"code": code, "message": message}
    return json.dumps(document, separators=(",", ":")).encode(), JSON_CONTENT_TYPE


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


# -- OTLP/JSON ----------------------------------------------------------------


class _JsonDecoder:
    """Decodes OTLP/JSON per the spec (lowerCamelCase keys, hex ids, int64 as strings)."""

    def __init__(self, max_value_chars: int) -> None:
        self.max_chars = max_value_chars
        self.truncated = 0
        self.sanitize = False

    def decode(self, body: bytes, max_spans: int) -> DecodedBatch:
        try:
            # Strict UTF-8 (json.loads on bytes would also take UTF-16/32 and
            # UTF-8-encoded surrogates). After that, NUL and lone surrogates can
            # only come in as \u escapes: check strings one by one only then.
            text = body.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            raise OtlpDecodeError("body is not UTF-8") from None
        self.sanitize = "\\u" in text and _RISKY_ESCAPE.search(text) is not None
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise OtlpDecodeError(f"body is not valid JSON: {err}") from None
        if not isinstance(document, dict):
            raise OtlpDecodeError("body is not a JSON object")
        resources = _json_list(document.get("resourceSpans"), "resourceSpans")
        groups = []
        total = 0
        for resource_spans in resources:
            if not isinstance(resource_spans, dict):
                raise OtlpDecodeError("resourceSpans holds a non-object")
            scopes = _json_list(resource_spans.get("scopeSpans"), "scopeSpans")
            for scope_spans in scopes:
                if not isinstance(scope_spans, dict):
                    raise OtlpDecodeError("scopeSpans holds a non-object")
                spans = _json_list(scope_spans.get("spans"), "spans")
                total += len(spans)
                groups.append((resource_spans, scope_spans, spans))
        if total > max_spans:
            raise TooManySpans(f"{total} spans in one request; the limit is {max_spans}")

        batch = DecodedBatch()
        index = 0
        resource_cache: dict[int, dict[str, Any]] = {}
        for resource_spans, scope_spans, spans in groups:
            try:
                key = id(resource_spans)
                if key not in resource_cache:
                    resource_cache[key] = self.resource_attributes(resource_spans)
                resource_attributes = resource_cache[key]
                scope_name = self.scope_name(scope_spans)
            except _Reject as err:
                if spans:
                    batch._reject(index, str(err), count=len(spans))
                index += len(spans)
                continue
            for raw in spans:
                try:
                    batch.spans.append(self.span(raw, resource_attributes, scope_name))
                except _Reject as err:
                    batch._reject(index, str(err))
                index += 1
        batch.truncated_values = self.truncated
        return batch

    def resource_attributes(self, resource_spans: dict) -> dict[str, Any]:
        resource = resource_spans.get("resource")
        if resource is None:
            return {}
        if not isinstance(resource, dict):
            raise _Reject("resource is not an object")
        return self.attributes(resource.get("attributes"))

    def scope_name(self, scope_spans: dict) -> str:
        scope = scope_spans.get("scope")
        if scope is None:
            return ""
        if not isinstance(scope, dict):
            raise _Reject("scope is not an object")
        return self.text(scope.get("name"), "scope name")

    def span(self, raw: Any, resource_attributes: dict, scope_name: str) -> SpanIn:
        if not isinstance(raw, dict):
            raise _Reject("span is not an object")
        trace_id = _json_id(raw.get("traceId"), 16, "traceId")
        span_id = _json_id(raw.get("spanId"), 8, "spanId")
        parent_span_id = _json_id(raw.get("parentSpanId"), 8, "parentSpanId", optional=True)
        start_ns = _nanos(raw.get("startTimeUnixNano"), "startTimeUnixNano")
        end_ns = _nanos(raw.get("endTimeUnixNano"), "endTimeUnixNano")
        if not start_ns or not end_ns:
            raise _Reject("missing startTimeUnixNano or endTimeUnixNano")
        if end_ns < start_ns:
            raise _Reject("endTimeUnixNano is before startTimeUnixNano")
        status_code, status_message = self.status(raw.get("status"))
        return SpanIn(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            name=self.text(raw.get("name"), "name"),
            kind=_enum(raw.get("kind"), _KINDS, _KIND_NAMES, "kind"),
            start_ns=start_ns,
            end_ns=end_ns,
            attributes=self.attributes(raw.get("attributes")),
            events=self.events(raw.get("events")),
            status_code=status_code,
            status_message=status_message,
            resource_attributes=resource_attributes,
            scope_name=scope_name,
        )

    def status(self, raw: Any) -> tuple[str, str]:
        if raw is None:
            return "unset", ""
        if not isinstance(raw, dict):
            raise _Reject("status is not an object")
        code = _enum(raw.get("code"), _STATUSES, _STATUS_NAMES, "status code")
        return code, self.text(raw.get("message"), "status message")

    def events(self, raw: Any) -> list[dict[str, Any]]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise _Reject("events is not a list")
        events = []
        for event in raw:
            if not isinstance(event, dict):
                raise _Reject("an event is not an object")
            events.append(
                {
                    "name": self.text(event.get("name"), "event name"),
                    "time_ns": _nanos(event.get("timeUnixNano"), "event timeUnixNano"),
                    "attributes": self.attributes(event.get("attributes")),
                }
            )
        return events

    def attributes(self, raw: Any, depth: int = 1) -> dict[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, list):
            raise _Reject("attributes is not a list")
        out: dict[str, Any] = {}
        for pair in raw:
            if not isinstance(pair, dict):
                raise _Reject("an attribute is not an object")
            key = pair.get("key")
            if type(key) is not str:
                raise _Reject("an attribute key is not a string")
            if self.sanitize:
                key = _clean(key)
            out[key] = self.value(pair.get("value"), depth, key)
        return out

    def value(self, raw: Any, depth: int, key: str) -> Any:
        if raw is None:
            return None
        if type(raw) is not dict:
            raise _Reject(f"attribute {key!r}: value is not an object")
        if len(raw) == 1:
            ((kind, value),) = raw.items()
        else:
            kinds = [k for k in raw if k in _VALUE_KEYS]
            if not kinds:
                return None
            if len(kinds) > 1:
                raise _Reject(f"attribute {key!r}: value has several kinds")
            kind = kinds[0]
            value = raw[kind]
        if value is None:
            return None
        if kind == "stringValue":
            if type(value) is str:
                return self.string(value)
        elif kind == "intValue":
            return _int64(value, key)
        elif kind == "boolValue":
            if type(value) is bool:
                return value
        elif kind == "doubleValue":
            return _double(value, key)
        elif kind == "arrayValue" or kind == "kvlistValue":
            if depth >= MAX_VALUE_DEPTH:
                raise _Reject(f"attribute {key!r}: nested deeper than {MAX_VALUE_DEPTH}")
            if type(value) is not dict:
                raise _Reject(f"attribute {key!r}: {kind} is not an object")
            values = value.get("values")
            if values is None:
                return [] if kind == "arrayValue" else {}
            if type(values) is not list:
                raise _Reject(f"attribute {key!r}: {kind}.values is not a list")
            if kind == "arrayValue":
                return [self.value(item, depth + 1, key) for item in values]
            return self.attributes(values, depth + 1)
        elif kind == "bytesValue":
            if type(value) is str:
                return _base64_text(value, key)
        else:
            return None
        raise _Reject(f"attribute {key!r}: {kind} has the wrong type")

    def text(self, raw: Any, what: str) -> str:
        if raw is None:
            return ""
        if type(raw) is not str:
            raise _Reject(f"{what} is not a string")
        return self.string(raw)

    def string(self, value: str) -> str:
        if self.sanitize:
            value = _clean(value)
        if len(value) > self.max_chars:
            self.truncated += 1
            return value[: self.max_chars] + TRUNCATION_MARKER
        return value


def _json_list(raw: Any, what: str) -> list:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise OtlpDecodeError(f"{what} is not a list")
    return raw


def _json_id(raw: Any, size: int, what: str, *, optional: bool = False) -> str:
    """A hex (or base64) id of ``size`` bytes as lowercase hex; "" for an absent parent."""
    if raw is None or raw == "":
        if optional:
            return ""
        raise _Reject(f"missing {what}")
    if type(raw) is not str or len(raw) > size * 4:
        raise _Reject(f"{what} is not {size * 2} hex digits")
    if len(raw) == size * 2 and _HEX[size].fullmatch(raw):
        hex_id = raw.lower()
    else:
        try:
            decoded = base64.b64decode(
                raw + "=" * (-len(raw) % 4), altchars=_altchars(raw), validate=True
            )
        except (binascii.Error, ValueError):
            decoded = b""
        if len(decoded) != size:
            raise _Reject(f"{what} is not {size * 2} hex digits")
        hex_id = decoded.hex()
    if hex_id == _ZERO_IDS[size]:
        if optional:
            return ""
        raise _Reject(f"{what} is all zeros")
    return hex_id


def _altchars(raw: str) -> bytes | None:
    return b"-_" if ("-" in raw or "_" in raw) else None


def _nanos(raw: Any, what: str) -> int:
    """A uint64 nanosecond timestamp; 0 when absent."""
    if raw is None:
        return 0
    kind = type(raw)
    if kind is str:
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 20):
            raise _Reject(f"{what} is not an integer")
        value = int(raw)
    elif kind is int:
        value = raw
    elif kind is float and raw.is_integer():
        value = int(raw)
    else:
        raise _Reject(f"{what} is not an integer")
    if not 0 <= value < _UINT64:
        raise _Reject(f"{what} is out of range")
    return value


def _int64(raw: Any, key: str) -> int:
    kind = type(raw)
    if kind is int:
        value = raw
    elif kind is str and _INT_RE.fullmatch(raw):
        value = int(raw)
    elif kind is float and raw.is_integer():
        value = int(raw)
    else:
        raise _Reject(f"attribute {key!r}: intValue is not an integer")
    if not -_INT64 <= value < _INT64:
        raise _Reject(f"attribute {key!r}: intValue is out of range")
    return value


def _double(raw: Any, key: str) -> float | str:
    kind = type(raw)
    if kind is float:
        value = raw
    elif kind is int:
        value = float(raw)
    elif kind is str:
        if raw in _NON_FINITE:
            return _NON_FINITE[raw]
        try:
            value = float(raw)
        except ValueError:
            raise _Reject(f"attribute {key!r}: doubleValue is not a number") from None
    else:
        raise _Reject(f"attribute {key!r}: doubleValue is not a number")
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


def _base64_text(raw: str, key: str) -> str:
    try:
        data = base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=_altchars(raw), validate=True)
    except (binascii.Error, ValueError):
        raise _Reject(f"attribute {key!r}: bytesValue is not base64") from None
    return base64.b64encode(data).decode()


def _enum(raw: Any, names: tuple[str, ...], by_name: dict[str, str], what: str) -> str:
    if raw is None:
        return names[0]
    if type(raw) is int:
        return names[raw] if 0 <= raw < len(names) else names[0]
    if type(raw) is str and raw in by_name:
        return by_name[raw]
    raise _Reject(f"{what} is not a known value")


def _clean(value: str) -> str:
    return _BAD_CHARS.sub("\ufffd", value)


# -- OTLP/protobuf -------------------------------------------------------------


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
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
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
