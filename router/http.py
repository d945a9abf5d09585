"""What the router's views share about the HTTP request itself: the body under the router's
own limit, and OpenAI-style JSON for an unexpected error (the views run without middleware)."""

import functools
import logging

from router.calls import error_response

MAX_BODY_BYTES = 8 * 2**20

log = logging.getLogger(__name__)


def openai_errors(view):
    """An unexpected error answers OpenAI-style JSON (these views run without middleware)."""

    @functools.wraps(view)
    async def wrapped(request, *args, **kwargs):
        try:
            return await view(request, *args, **kwargs)
        except Exception:
            log.exception("router: %s failed", request.path)
            return error_response(
                500, "Server error: something went wrong on our side.", type="server_error"
            )

    return wrapped


def body_bytes(request) -> bytes | None:
    """The request's body, read under the router's own limit (not Django's
    DATA_UPLOAD_MAX_MEMORY_SIZE, made for forms: an agent's long context with images is
    larger); None when it is over `MAX_BODY_BYTES`."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        return None
    raw = request.read(MAX_BODY_BYTES + 1)
    return None if len(raw) > MAX_BODY_BYTES else raw
