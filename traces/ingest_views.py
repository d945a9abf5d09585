"""The OTLP/HTTP endpoints the belvedir SDK and plain OpenTelemetry exporters talk to.

Plain Django views (not DRF): exact paths without a trailing slash, no redirects, answers in
the request's content type, and never a 500 for bad input.
"""

import json
import logging
import threading

from django.conf import settings
from django.db import DatabaseError, OperationalError
from django.http import HttpResponse, JsonResponse, UnreadablePostError
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from belvedir.authentication import bearer_token
from belvedir.error_responses import body_of, headers_of, status_of
from belvedir.errors import DomainError, Invalid
from belvedir.services import api_key_authenticate
from belvedir.text import size_text
from traces import otlp
from traces.services.ingest import spans_ingest
from traces.services.outcomes import outcome_record

log = logging.getLogger(__name__)
_in_flight = threading.BoundedSemaphore(settings.BELVEDIR_INGEST_CONCURRENCY)
OUTCOMES_MAX_BYTES = 64 * 1024
OUTCOMES_TOO_LARGE = f"The body is over {size_text(OUTCOMES_MAX_BYTES, iec=False)}."


def _error(content_type: str | None, status: int, message: str, **headers) -> HttpResponse:
    body, ctype = otlp.encode_error(content_type, http_status=status, message=message)
    response = HttpResponse(body, status=status, content_type=ctype)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


class BodyUnreadable(Exception):
    pass


def _read_body(request, limit: int) -> bytes | None:
    """At most limit + 1 bytes, without Django's DATA_UPLOAD_MAX_MEMORY_SIZE check."""
    length = request.META.get("CONTENT_LENGTH") or ""
    if length.isdigit() and int(length) > limit:
        return None
    try:
        data = request.read(limit + 1)
    except (OSError, UnreadablePostError):  # the client went away mid-body
        raise BodyUnreadable from None
    return None if len(data) > limit else data


@csrf_exempt
@require_POST
def traces(request):
    content_type = request.META.get("CONTENT_TYPE")
    media = otlp.media_type_of(content_type)
    key = api_key_authenticate(bearer_token(request) or "")
    if key is None:
        return _error(content_type, 401, "Unknown or revoked API key.")
    if media not in (otlp.JSON_CONTENT_TYPE, otlp.PROTOBUF_CONTENT_TYPE, "application/protobuf"):
        return _error(None, 415, "Send application/json or application/x-protobuf.")
    if not _in_flight.acquire(blocking=False):
        return _error(content_type, 503, "Ingest is busy; retry shortly.", Retry_After="1")
    try:
        limit = settings.BELVEDIR_INGEST_MAX_BYTES
        try:
            body = _read_body(request, limit)
        except BodyUnreadable:
            return _error(content_type, 400, "The body could not be read.")
        if body is None:
            return _error(content_type, 413, f"The body is over {limit} bytes.")
        try:
            batch = otlp.decode_request(
                body,
                content_type,
                request.META.get("HTTP_CONTENT_ENCODING"),
                max_bytes=limit,
                max_spans=settings.BELVEDIR_INGEST_MAX_SPANS,
            )
        except (otlp.PayloadTooLarge, otlp.TooManySpans) as exc:
            return _error(content_type, 413, str(exc))
        except otlp.UnsupportedMediaType as exc:
            return _error(content_type, 415, str(exc))
        except otlp.OtlpDecodeError as exc:
            return _error(content_type, 400, f"The body cannot be decoded: {exc}")
        try:
            stored = spans_ingest(key=key, spans=batch.spans)
        except OperationalError:
            log.warning("ingest: database unavailable", exc_info=True)
            return _error(content_type, 503, "Storage is busy; retry shortly.", Retry_After="2")
        body, ctype = otlp.encode_response(
            content_type,
            rejected=batch.rejected + stored.refused,
            error_message="; ".join([*batch.errors, *stored.errors])[:1000],
        )
        return HttpResponse(body, status=200, content_type=ctype)
    except DatabaseError:
        log.exception("ingest: database error")
        return _error(content_type, 503, "Storage is busy; retry shortly.", Retry_After="2")
    finally:
        _in_flight.release()


def _refusal(exc: DomainError) -> JsonResponse:
    return JsonResponse(body_of(exc), status=status_of(exc), headers=headers_of(exc))


@csrf_exempt
@require_POST
def outcomes(request):
    key = api_key_authenticate(bearer_token(request) or "")
    if key is None:
        body = {"detail": "Unknown or revoked API key.", "code": "not_authenticated"}
        return JsonResponse(body, status=401)
    try:
        body = _read_body(request, OUTCOMES_MAX_BYTES)
    except BodyUnreadable:
        return _refusal(Invalid("The body could not be read."))
    if body is None:
        body = {"detail": OUTCOMES_TOO_LARGE, "code": "too_large"}
        return JsonResponse(body, status=413)
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested too deep is not JSON here
        return _refusal(Invalid("The body must be JSON."))
    if not isinstance(data, dict):
        return _refusal(Invalid("The body must be a JSON object."))
    try:
        session = outcome_record(
            key=key, session_id=data.get("session_id"), outcome=data.get("outcome")
        )
    except DomainError as exc:  # Invalid is a 400, NotFound (no such session) a 404
        return _refusal(exc)
    return JsonResponse({"session_id": session.external_id, "outcome": session.outcome})
