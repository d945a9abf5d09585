"""What both OTLP decoders share: limits, errors, the records they produce, small helpers.

The request errors (:class:`OtlpError` and its subclasses), :class:`SpanIn`,
:class:`DecodedBatch`, the per-span :class:`_Reject`, the value limits, the span kind
and status names, and :func:`_double`. Imported by :mod:`traces.otlp_json`,
:mod:`traces.otlp_proto` and :mod:`traces.otlp`, which re-exports the public names:
import them from :mod:`traces.otlp`. It imports nothing from ``traces``, so the
decoders can use it without an import cycle through :mod:`traces.otlp`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_VALUE_DEPTH = 16
MAX_ERRORS = 20
MAX_REASON_CHARS = 200
TRUNCATION_MARKER = "…[truncated]"

_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
_STATUSES = ("unset", "ok", "error")
_ZERO_IDS = {16: "0" * 32, 8: "0" * 16}
_NON_FINITE = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


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


def _double(raw: Any, key: str) -> float | str:
    """A doubleValue; NaN and ±Infinity as the strings "NaN", "Infinity", "-Infinity"."""
    kind = type(raw)
    if kind is float:
        value = raw
    elif kind is int:
        try:
            value = float(raw)
        except OverflowError:  # an integer past the double's range: infinite, as 1e400 reads
            value = math.inf if raw > 0 else -math.inf
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
