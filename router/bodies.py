"""What the router reads of an upstream's answer, with bounds: a user's base (an own-key call)
may answer anything, as slowly as it likes, and the router is one process serving every run.

A call's request, its answer's headers and (answered whole) its body must all come within
BELVEDIR_ROUTER_CALL_DEADLINE (httpx's timeout is per read: a base dripping a byte under it
would hold the call forever). A whole answer is read up to BELVEDIR_ROUTER_MAX_ANSWER_BYTES,
an error answer up to BELVEDIR_ROUTER_MAX_ERROR_BYTES; past either the call ends with a 502
naming the limit (`AnswerTooLarge`). A stream's events are relayed as they come (their
reader, `router.sse`, keeps bounded state); only its error answer is read here.
"""

import asyncio
import time

import httpx
from django.conf import settings

from belvedir.text import size_text


class AnswerTooLarge(Exception):
    """The upstream's answer went past what the router reads of it."""

    def __init__(self, limit: int, *, error: bool):
        self.limit, self.error = limit, error
        kind = "error answer" if error else "answer"
        super().__init__(
            f"The upstream's {kind} is over {size_text(limit)}, the most the router reads."
        )


def deadline() -> float:
    """When a call started now must have its answer by (`time.monotonic()`)."""
    return time.monotonic() + settings.BELVEDIR_ROUTER_CALL_DEADLINE


def within(ends: float) -> asyncio.Timeout:
    """An `asyncio.timeout` ending at `ends` (a `deadline()`): TimeoutError past it."""
    return asyncio.timeout(ends - time.monotonic())


async def read_bounded(response: httpx.Response, *, error: bool) -> bytes:
    """The response's body (decoded as httpx decodes it), at most its limit: AnswerTooLarge
    past it, the rest not read."""
    if error:
        limit = settings.BELVEDIR_ROUTER_MAX_ERROR_BYTES
    else:
        limit = settings.BELVEDIR_ROUTER_MAX_ANSWER_BYTES
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge(limit, error=error)
        chunks.append(chunk)
    return b"".join(chunks)


async def opened(
    http: httpx.AsyncClient, request: httpx.Request, *, streamed: bool
) -> tuple[httpx.Response, bytes | None]:
    """The upstream's response and its body, read (bounded) and closed; a stream's response
    still open with no body (None) when it answered 2xx."""
    response = await http.send(request, stream=True)
    if streamed and response.status_code < 300:
        return response, None
    try:
        return response, await read_bounded(response, error=response.status_code >= 300)
    finally:
        await response.aclose()
