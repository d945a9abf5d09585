"""OTLP/HTTP trace decoding: request bytes in, plain span records out.

The public entry point: import everything from here. This module holds the request
level (content type and encoding, size limits, decompression, and the response and
error bodies) and dispatches to one of two decoders: :mod:`traces.otlp_json` for
OTLP/JSON and :mod:`traces.otlp_proto` for protobuf. The errors, records
(:class:`SpanIn`, :class:`DecodedBatch`) and limits both decoders share live in
:mod:`traces.otlp_base` and are re-exported here.

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

import json
import zlib
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

# Errors, records and limits shared by both decoders live in traces.otlp_base; they are
# part of this module's API too (the constants outside ``__all__`` are kept importable).
from traces.otlp_base import (
    MAX_ERRORS,  # noqa: F401
    MAX_REASON_CHARS,  # noqa: F401
    MAX_VALUE_DEPTH,  # noqa: F401
    TRUNCATION_MARKER,  # noqa: F401
    DecodedBatch,
    OtlpDecodeError,
    OtlpError,
    PayloadTooLarge,
    SpanIn,
    TooManySpans,
    UnsupportedMediaType,
)
from traces.otlp_json import _JsonDecoder
from traces.otlp_proto import _ProtoDecoder

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
    "trace_parent_of",
]

_HEX = frozenset("0123456789abcdef")


def trace_parent_of(header: str | None) -> tuple[str, str] | None:
    """The (trace id, parent span id) of a W3C `traceparent` header
    (`00-<32 hex>-<16 hex>-<2 hex flags>`; a later version may add fields after these), or
    None when it is missing or malformed (all-zero ids, version ff, not lowercase hex)."""
    parts = (header or "").strip().split("-")
    if len(parts) < 4 or [len(p) for p in parts[:4]] != [2, 32, 16, 2]:
        return None
    if not all(set(p) <= _HEX for p in parts[:4]) or parts[0] == "ff":
        return None
    if parts[0] == "00" and len(parts) != 4:
        return None
    trace_id, span_id = parts[1], parts[2]
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return trace_id, span_id


JSON_CONTENT_TYPE = "application/json"
PROTOBUF_CONTENT_TYPE = "application/x-protobuf"
_PROTOBUF_TYPES = frozenset({PROTOBUF_CONTENT_TYPE, "application/protobuf"})

MAX_BODY_BYTES = 5 * 1024 * 1024
MAX_SPANS = 1000
MAX_VALUE_CHARS = 1_000_000
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_MAX_GZIP_MEMBERS = 64


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
