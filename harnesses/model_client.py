"""One OpenAI-compatible chat call from the platform (environment generation), with its own
error type: a message a user can read, never the key, and of an error answer only the message
of an OpenAI-style error (never the body of whatever answered). No redirect is followed. A
call to a base its user named goes through a pinned client (`belvedir.pinned.sync_client`:
each connection to an address the model-host policy checked). A call the platform pays for is
metered (`Meter`): each request to the upstream is reserved before it is sent and settled
with the usage the upstream reported after it."""

import time
from typing import Protocol

import httpx

from belvedir.pinned import BaseRefused

RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}


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
    post = client.post if client is not None else httpx.post
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
            response = post(url, json=body, headers=headers, timeout=remaining)
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
                _settle(meter, body, _usage(response), sent=True)
                return _content(response, api_base)
            _settle(meter, body, {}, sent=True)  # an error answer: no tokens
            if response.status_code < 400:
                raise ModelError(
                    f"The model at {api_base} answered {response.status_code}, a redirect, "
                    "which is not followed."
                )
            if response.status_code not in RETRY_STATUSES or last:
                raise ModelError(
                    f"The model at {api_base} answered {response.status_code}"
                    + _error_text(response, api_key)
                )
        time.sleep(backoff * 2**attempt)
    raise ModelError("unreachable")  # pragma: no cover - the loop returns or raises


def _settle(meter: Meter | None, body: dict, usage: dict | None, *, sent: bool) -> None:
    if meter is not None:
        meter.settle(body, usage, sent=sent)


def _usage(response: httpx.Response) -> dict | None:
    """The usage an answer reports, or None when it reports none."""
    try:
        usage = response.json().get("usage")
    except (ValueError, AttributeError):
        return None
    return usage if isinstance(usage, dict) else None


def _error_text(response: httpx.Response, api_key: str) -> str:
    """What follows the status in the error: ": " and the message of an OpenAI-style error
    answer (the key replaced if it is echoed), else "." alone: the body of anything else is
    not shown (the base may be anything, an internal page included)."""
    try:
        document = response.json()
    except ValueError:
        document = None
    error = document.get("error") if isinstance(document, dict) else None
    message = str(error.get("message") or "") if isinstance(error, dict) else ""
    if not message:
        return "."
    if len(api_key) >= 4:
        message = message.replace(api_key, "[redacted]")
    return f": {message[:300]}"


def _content(response: httpx.Response, api_base: str) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError(f"The model at {api_base} answered without a chat completion.") from None
    if not isinstance(content, str):
        raise ModelError(f"The model at {api_base} answered without text.")
    return content
