"""One OpenAI-compatible chat call from the platform (environment generation), with its own
error type: a message a user can read, never the key, and of an error answer only the message
of an OpenAI-style error (never the body of whatever answered). No redirect is followed. A
call to a base its user named goes through a pinned client (`belvedir.pinned.sync_client`:
each connection to an address the model-host policy checked). A call the platform pays for is
metered (`Meter`): each request to the upstream is reserved before it is sent and settled
with the usage the upstream reported after it.

An answer is read as it arrives, within the call's deadline (checked between its chunks:
httpx's timeout is per read) and up to `MAX_ANSWER_BYTES` (an error answer
`MAX_ERROR_BYTES`): a base dripping its answer, or answering without end, fails the call
instead of holding the worker."""

import json
import time
from typing import Protocol

import httpx

from belvedir.pinned import BaseRefused, error_message
from belvedir.text import size_text

RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_ANSWER_BYTES = 32 * 2**20
MAX_ERROR_BYTES = 64 * 2**10


class ModelError(Exception):
    """The model could not be reached, refused, or answered something unusable."""


class Meter(Protocol):
    """The spend of a call the platform pays for, one request to the upstream at a time."""

    def reserve(self, body: dict) -> None:
        """Reserve the request's worst case before it is sent; ModelError when it may not."""

    def settle(self, body: dict, usage: dict | None, *, sent: bool) -> None:
        """Settle the reserved request: `usage` as the upstream reported it (None when none
        came: the worst case if the request reached the upstream, nothing if it never
        left)."""


def chat(
    *,
    api_base: str,
    api_key: str,
    model: str,
    messages: list[dict],
    deadline: float,
    max_tokens: int | None = None,
    retries: int = 2,
    backoff: float = 1.0,
    meter: Meter | None = None,
    client: httpx.Client | None = None,
) -> str:
    """The assistant's text for `messages`; retries 429/5xx and connection errors with backoff,
    all before `deadline` (a `time.monotonic()` value); each request metered by `meter`, sent
    with `client` (a user's base: its pinned client; None: httpx's own, for the operator's
    upstream)."""
    stream = client.stream if client is not None else httpx.stream
    url = api_base.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body: dict = {"model": model, "messages": messages}
    if max_tokens:
        body["max_tokens"] = max_tokens
    for attempt in range(retries + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 1:
            raise ModelError(f"The model at {api_base} did not answer in time.")
        last = attempt == retries or remaining < backoff * 2**attempt + 5
        if meter is not None:
            meter.reserve(body)
        try:
            with stream("POST", url, json=body, headers=headers, timeout=remaining) as response:
                content = _read(response, deadline, api_base)
        except ModelError:  # too slow or too large: it may have been billed
            _settle(meter, body, None, sent=True)
            raise
        except BaseRefused as exc:  # on connecting: nothing was sent
            _settle(meter, body, None, sent=False)
            raise ModelError(f"The model base {api_base} is refused: {exc}.") from None
        except httpx.TimeoutException as exc:
            _settle(meter, body, None, sent=not isinstance(exc, httpx.ConnectTimeout))
            raise ModelError(f"The model at {api_base} did not answer in time.") from None
        except httpx.HTTPError as exc:
            _settle(meter, body, None, sent=not isinstance(exc, httpx.ConnectError))
            if last:
                raise ModelError(
                    f"Could not reach the model at {api_base}: {exc.__class__.__name__}."
                ) from None
        else:
            if response.status_code < 300:
                document = _document(content)
                _settle(meter, body, _usage(document), sent=True)
                return _content(document, api_base)
            _settle(meter, body, {}, sent=True)  # an error answer: no tokens
            if response.status_code < 400:
                raise ModelError(
                    f"The model at {api_base} answered {response.status_code}, a redirect, "
                    "which is not followed."
                )
            if response.status_code not in RETRY_STATUSES or last:
                raise ModelError(
                    f"The model at {api_base} answered {response.status_code}"
                    + _error_text(content, api_key)
                )
        time.sleep(backoff * 2**attempt)
    raise ModelError("unreachable")  # pragma: no cover - the loop returns or raises


def _settle(meter: Meter | None, body: dict, usage: dict | None, *, sent: bool) -> None:
    if meter is not None:
        meter.settle(body, usage, sent=sent)


def _read(response: httpx.Response, deadline: float, api_base: str) -> bytes:
    """The answer's body, by `deadline` and at most its limit; ModelError past either."""
    limit = MAX_ERROR_BYTES if response.status_code >= 300 else MAX_ANSWER_BYTES
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise ModelError(f"The model at {api_base} answered over {size_text(limit)}.")
        if time.monotonic() > deadline:
            raise ModelError(f"The model at {api_base} did not answer in time.")
        chunks.append(chunk)
    return b"".join(chunks)


def _document(content: bytes):
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return None


def _usage(document) -> dict | None:
    """The usage an answer reports, or None when it reports none."""
    usage = document.get("usage") if isinstance(document, dict) else None
    return usage if isinstance(usage, dict) else None


def _error_text(content: bytes, api_key: str) -> str:
    """What follows the status in the error: ": " and the message of an OpenAI-style error
    answer (the key replaced if it is echoed), else "." alone: the body of anything else is
    not shown (the base may be anything, an internal page included)."""
    message = error_message(content, api_key)
    return f": {message}" if message else "."


def _content(document, api_base: str) -> str:
    try:
        content = document["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError(f"The model at {api_base} answered without a chat completion.") from None
    if not isinstance(content, str):
        raise ModelError(f"The model at {api_base} answered without text.")
    return content
