"""The OTLP/JSON decoder: a request body as JSON text in, a :class:`DecodedBatch` out.

Called by :func:`traces.otlp.decode_request` once the body is within the size limits
and decompressed. Follows the OTLP/JSON spec (lowerCamelCase keys, hex ids, int64 as
strings) and is lenient where the SDK or other clients differ: base64 ids, numbers
for int64 and timestamps, enum names or numbers. Strings are checked for NUL and lone
surrogates only when the text holds a risky ``\\u`` escape.

The body is parsed with orjson (several times faster than the standard library). Where the
two could differ, the standard library's reading stands: a body orjson refuses (a byte order
mark, NaN or Infinity, lone surrogate escapes, nesting past 1,024 levels, invalid UTF-8) or
one holding a negative integer of 19 or more digits (orjson reads those below int64 as a
float) is parsed again with :func:`json.loads`, which accepts or refuses it as before.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import orjson

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

_KIND_NAMES = {f"SPAN_KIND_{name.upper()}": name for name in _KINDS}
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
_INT_RE = re.compile(r"-?[0-9]{1,20}")
_INT64 = 2**63
_UINT64 = 2**64
_RISKY_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_NEGATIVE_BIG_INT = re.compile(rb"-[0-9]{19}")


class _JsonDecoder:
    """Decodes OTLP/JSON per the spec (lowerCamelCase keys, hex ids, int64 as strings)."""

    def __init__(self, max_value_chars: int) -> None:
        self.max_chars = max_value_chars
        self.truncated = 0
        self.sanitize = False

    def decode(self, body: bytes, max_spans: int) -> DecodedBatch:
        document = _parse(body)
        # Strict UTF-8 came in (both parsers check it): NUL and lone surrogates can only
        # come in as \u escapes, so strings are checked one by one only when one is there.
        self.sanitize = b"\\u" in body and _RISKY_ESCAPE.search(body) is not None
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
                key = storable(key)
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
            value = storable(value)
        if len(value) > self.max_chars:
            self.truncated += 1
            return value[: self.max_chars] + TRUNCATION_MARKER
        return value


def _parse(body: bytes) -> Any:
    """The JSON document in ``body``: orjson, else (see the module's docstring) json.loads."""
    if _NEGATIVE_BIG_INT.search(body) is None:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    try:
        # Strict UTF-8 (json.loads on bytes would also take UTF-16/32 and UTF-8-encoded
        # surrogates), one byte order mark allowed.
        text = body.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise OtlpDecodeError("body is not UTF-8") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise OtlpDecodeError(f"body is not valid JSON: {err}") from None


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
