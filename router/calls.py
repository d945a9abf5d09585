"""A router call's lifecycle, from its admission to its settlement: `admit` (its run key, its
run running and covered, its worst case reserved against the run's cap by billing), then a
`Call` forwards it to its target (`router.targets`: the operator's upstream, or the user's base
for an own-key call) at its endpoint's path (`router.endpoints`), reads its answer (whole or streamed
through as it arrives) and settles it exactly once, whatever path its end takes (answered,
an upstream error, a timeout, a client gone): its span and its money (`router.settlement`).
"""

import asyncio
import functools
import json
import time

import httpx
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse

from belvedir.pinned import error_message, openai_error
from billing.pricing import Usage, cache_ttl_asked, usage_cost_micros
from billing.spend import spend_reserve_async
from router import bodies
from router.endpoints import CHAT, Endpoint, Reading
from router.pinned import BaseRefused
from router.services import (
    Admission,
    CallRecord,
    RouterRefusal,
    Settlement,
    admission_cached,
    call_admit,
    off_loop,
    refused_reservation,
)
from router.settlement import settler
from router.sse import EventReader
from router.targets import Target
from runs.models import Run

_call_admit = off_loop(call_admit)
_refused_reservation = off_loop(refused_reservation)

# The upstream refusing the platform's own account (its key, its credits): not the caller's
# doing, so not answered as if it were (the upstream's text goes to the span only).
UPSTREAM_ACCOUNT_STATUSES = frozenset({401, 402, 403})


def error_response(
    status: int, message: str, *, type: str, code: str | None = None, param: str | None = None
) -> JsonResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JsonResponse(body, status=status)


def refused(exc: RouterRefusal) -> JsonResponse:
    return error_response(exc.status, exc.message, type=exc.type, code=exc.code, param=exc.param)


async def record_refused(caller, call: CallRecord, refusal: RouterRefusal) -> None:
    """A call refused before it was admitted, traced in its caller's run (nothing reserved)."""
    call.end(refusal.status, refusal.message)
    await settler().settle(Settlement(caller[0], caller[1], call))


def upstream_error(
    status: int, content: bytes, *, target: Target | None = None
) -> tuple[JsonResponse, int, str]:
    """The upstream's error as the router answers it, only ever OpenAI-style: its status and
    message, a 502 for a redirect (never followed) or for a refusal of the platform's account;
    with the status and the upstream's own message, for the span. Of a user's base's error
    only an OpenAI-style error's message is shown, the user's key never in it
    (`belvedir.pinned.error_message`, as environment generation shows it)."""
    covered = target is None or target.covered
    if 300 <= status < 400:
        message = f"The upstream answered {status}, a redirect, which the router does not follow."
        return error_response(502, message, type="upstream_error", code="redirect"), 502, message
    error = openai_error(content)
    kind = str(error.get("type") or "upstream_error") if error is not None else "upstream_error"
    code = error.get("code") if error is not None else None
    if not covered:
        message = error_message(content, target.key) or f"The upstream answered {status}."
    elif error is not None:
        message = str(error.get("message") or f"The upstream answered {status}.")
    else:
        text = content.decode("utf-8", "replace")[:500]
        message = f"The upstream answered {status}: {text}"
    if status in UPSTREAM_ACCOUNT_STATUSES and covered:
        answer = error_response(
            502,
            "The platform's model upstream refused the call.",
            type="upstream_error",
            code="upstream_refused",
        )
        return answer, 502, f"The upstream answered {status}: {message}"
    return error_response(status, message, type=kind, code=code), status, message


class BodyRefused(Exception):
    """A call's body the router does not take: the refusal, and the body as far as it read."""

    def __init__(self, refusal: RouterRefusal, body=None):
        super().__init__(refusal.message)
        self.refusal, self.body = refusal, body


def checked_body(raw: bytes | None, *, limit: int, endpoint: Endpoint = CHAT) -> dict:
    """The call's body; `BodyRefused` for one over `limit` (None) or not JSON with the
    endpoint's prompt. (What fields a covered call may carry is checked as it is admitted:
    `router.services.covered_body`.)"""
    if raw is None:
        message = f"The request body is over {limit // 2**20} MB."
        raise BodyRefused(
            RouterRefusal(413, message, type="invalid_request_error", code="body_too_large")
        )
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        body = None
    message = endpoint.body_problem(body)
    if message is not None:
        raise BodyRefused(
            RouterRefusal(400, message, type="invalid_request_error", code=None), body
        )
    return body


def forwarded_body(admission: Admission, body: dict, endpoint: Endpoint = CHAT) -> dict:
    """What goes upstream: an own-key call's body as sent (usage asked of a stream, for its
    span); a covered call's checked body, every output limit its endpoint's upstream reads set
    to the one reserved for (all it may produce), reasoning budgets under it."""
    if not admission.covered:
        return endpoint.usage_asked(dict(body))
    checked = admission.body if admission.body is not None else body
    return endpoint.forwarded_body(checked, endpoint.output_limit(admission.price, checked))


async def admit(
    token: str, model: str, body: dict, call: CallRecord, *, asgi: bool, endpoint: Endpoint = CHAT
) -> "Call":
    """The call admitted and reserved; one refused for its run's cap while calls of that run
    wait to be settled (their reservations still held) is tried again once they are."""
    try:
        return Call(call, await _admit(token, model, body, call, asgi, endpoint), endpoint)
    except RouterRefusal as exc:
        pending = exc.caller is not None and settler().pending_for(exc.caller[1])
        if exc.code != "spend_cap_reached" or not pending:
            raise
    await settler().flush()
    return Call(call, await _admit(token, model, body, call, asgi, endpoint), endpoint)


async def _admit(
    token: str, model: str, body: dict, call: CallRecord, asgi: bool, endpoint: Endpoint
) -> Admission:
    """Admitted from this process's cached lookups and reserved from the event loop (one
    round trip; served by ASGI, whose event loop lives as long as the process)
    when it can be; else everything in a worker thread through the ORM."""
    cached = admission_cached(token=token, model=model, body=body, endpoint=endpoint)
    if cached is not None and not cached.covered:  # own-key: nothing to reserve
        return cached
    if cached is None or not asgi:
        admitting = asyncio.ensure_future(
            _call_admit(token=token, model=model, body=body, endpoint=endpoint)
        )
    else:
        admitting = asyncio.ensure_future(_reserved(cached))
    # Shielded: a client gone meanwhile must not leave a reservation nothing releases.
    try:
        admission = await asyncio.shield(admitting)
    except asyncio.CancelledError:
        admitting.add_done_callback(functools.partial(_release_abandoned, call))
        raise
    if admission is None:
        raise await _refused_reservation(cached.key, cached.run_id, cached.reserved_micros)
    return admission


async def _reserved(admission: Admission) -> Admission | None:
    """The cached admission once reserved; None when its run could not reserve it."""
    reserved = await spend_reserve_async(
        account=Run, account_id=admission.run_id, amount=admission.reserved_micros
    )
    return admission if reserved else None


def _release_abandoned(call: CallRecord, admitting: asyncio.Future) -> None:
    """An admission whose client left while it was being made: released, and traced."""
    if admitting.cancelled() or admitting.exception() is not None or admitting.result() is None:
        return
    call.fail(499, "The client disconnected.")
    Call(call, admitting.result()).finish_after_answer(hurry=True)


class Call:
    """An admitted call of an endpoint: its record (what its span says) and its admission
    (what it reserved, where it goes). Settled at most once, whatever path its end takes."""

    def __init__(self, record: CallRecord, admission: Admission, endpoint: Endpoint = CHAT) -> None:
        self.record, self.admission, self.endpoint = record, admission, endpoint
        self.headers: dict[str, str] = {}  # the caller's headers the upstream gets too

    def target(self) -> tuple[Target, str, dict[str, str]]:
        """Where the call goes: its admission's target, the URL of its endpoint there, and
        the headers (the target's key, the caller's headers the endpoint passes on)."""
        target = self.admission.target
        headers = self.endpoint.authorized(target, target.headers(**self.headers))
        return target, target.url(self.endpoint.path), headers

    def settlement(self) -> Settlement | None:
        """The call's settlement, the first time it is asked for; None after (a call settles
        at most once, whatever path its cancellation takes)."""
        call = self.record
        if call.settled:
            return None
        call.settled = True
        call.ended_ns = call.ended_ns or time.time_ns()
        return Settlement.of(self.admission, call)

    async def finish(self) -> None:
        """Settle the call and record its span before answering, even when the request task
        is being cancelled (`router.settlement`: written with whatever else is pending)."""
        settlement = self.settlement()
        if settlement is not None:
            await settler().settle(settlement)

    def finish_after_answer(self, *, hurry: bool = False) -> asyncio.Future | None:
        """Settle after the answer went out, in the next batch: the reservation keeps the cap
        safe meanwhile. The future is done once it is written (None when it was settled)."""
        settlement = self.settlement()
        if settlement is None:
            return None
        return settler().submit(settlement, hurry=hurry)

    async def failed(self, status: int, message: str, response):
        self.record.fail(status, message)
        await self.finish()
        return response

    def charge_if_sent(self) -> None:
        """No usage came back: once the request reached the upstream, the upstream may bill it
        (a dropped connection does not stop a non-streamed completion), so the call costs its
        reserved worst case; a request that never left (a connect error) costs nothing."""
        if self.record.sent:
            self.record.cost_micros = self.admission.reserved_micros

    def traced(self) -> dict:
        """httpx's extensions marking the record `sent` once the request's first byte is
        written."""
        call = self.record

        async def trace(event: str, info: dict) -> None:
            if event.endswith("send_request_headers.started"):
                call.sent = True

        return {"trace": trace}

    def _cost(self) -> int:
        if self.admission.price is None:  # an own-key call of a model the catalog has not
            return 0
        return usage_cost_micros(self.admission.price, self.record.usage())

    def record_usage(self, usage: Usage, forwarded: dict) -> None:
        """The call's tokens as its span and its cost have them: cache writes whose time the
        upstream did not say, at the dearest the call asked for (as its reservation priced
        them)."""
        if usage.cache_write_tokens:
            usage = usage.with_ttl(cache_ttl_asked(forwarded))
        self.record.use(usage, output=self.endpoint.produces_output)

    async def send(self, sending, ends: float):
        """What `sending` (`router.bodies.opened`) gave, by `ends` (a `bodies.deadline()`); or,
        when nothing usable came, the error answer (the call settled)."""
        try:
            async with bodies.within(ends):
                return await sending
        except BaseRefused as exc:  # the user's base, refused on connecting (nothing sent)
            message = f"The model base may not be called: {exc}."
            answer = error_response(
                403, message, type="invalid_request_error", code="model_base_refused"
            )
            return await self.failed(403, message, answer)
        except bodies.AnswerTooLarge as exc:  # it may have billed us: assume the worst
            self.record.cost_micros = self.admission.reserved_micros
            answer = error_response(502, str(exc), type="upstream_error", code="answer_too_large")
            return await self.failed(502, str(exc), answer)
        except (httpx.TimeoutException, TimeoutError):
            self.charge_if_sent()
            message = "The upstream did not answer in time."
            answer = error_response(504, message, type="upstream_error", code="timeout")
            return await self.failed(504, message, answer)
        except httpx.HTTPError as exc:
            self.charge_if_sent()
            message = f"The upstream could not be reached: {type(exc).__name__}."
            answer = error_response(502, message, type="upstream_error")
            return await self.failed(502, message, answer)
        except asyncio.CancelledError:  # the client went away before the answer
            self.charge_if_sent()
            self.record.fail(499, "The client disconnected.")
            await self.finish()
            raise

    async def opened(self, forwarded: dict, http: httpx.AsyncClient, *, streamed: bool):
        """The request sent: (the upstream's 2xx response, its body read; None for a stream
        still open), or the answer to give instead (it failed, or answered an error)."""
        target, url, headers = self.target()
        request = http.build_request(
            "POST", url, json=forwarded, headers=headers, extensions=self.traced()
        )
        sent = await self.send(bodies.opened(http, request, streamed=streamed), bodies.deadline())
        if isinstance(sent, JsonResponse):
            return sent
        response, content = sent
        if response.status_code >= 300:
            reply, status, message = upstream_error(response.status_code, content, target=target)
            return await self.failed(status, message, reply)
        return response, content

    async def complete(self, forwarded: dict, http: httpx.AsyncClient, *, settle_later: bool):
        """Forward a call answered whole; settled after the answer (ASGI) or before it."""
        opened = await self.opened(forwarded, http, streamed=False)
        if not isinstance(opened, tuple):
            return opened
        response, content = opened
        try:
            document = json.loads(content)
        except (ValueError, RecursionError):
            document = None
        if not isinstance(document, dict):
            message = "The upstream answered with something that is not JSON."
            # It may have billed us: assume the worst.
            self.record.cost_micros = self.admission.reserved_micros
            return await self.failed(
                502, message, error_response(502, message, type="upstream_error")
            )
        self.read(self.endpoint.read(document), forwarded)
        if settle_later:
            self.finish_after_answer()
        else:
            await self.finish()
        return HttpResponse(content, status=response.status_code, content_type="application/json")

    def read(self, reading: Reading, forwarded: dict) -> None:
        call = self.record
        call.response_model = reading.model
        call.output_text, call.finish_reason = reading.text, reading.finish_reason
        if reading.usage is None:  # no usage: charge the worst case reserved
            call.cost_micros = self.admission.reserved_micros
            return
        self.record_usage(reading.usage, forwarded)
        call.cost_micros = self._cost()

    async def stream(self, forwarded: dict):
        """Forward a streamed call; its events pass through as they arrive (`relay`)."""
        opened = await self.opened(forwarded, self.admission.target.client(), streamed=True)
        if not isinstance(opened, tuple):
            return opened
        response, _ = opened
        streamed = StreamingHttpResponse(
            self.relay(response, forwarded), content_type="text/event-stream"
        )
        streamed["Cache-Control"] = "no-cache"
        streamed["X-Accel-Buffering"] = "no"
        return streamed

    async def relay(self, response: httpx.Response, forwarded: dict):
        """Pass the upstream's events through as they come; the call is settled once they end
        (with the next batch), or at once when the client leaves or the upstream stream
        breaks."""
        call, reader = self.record, self.endpoint.stream_reader()
        try:
            async for chunk in response.aiter_raw():
                reader.feed(chunk)
                yield chunk
        except (asyncio.CancelledError, GeneratorExit):  # cancelled, or closed at a yield
            call.fail(499, "The client disconnected mid-stream.")
            raise
        except httpx.HTTPError as exc:
            call.fail(502, f"The upstream stream broke: {type(exc).__name__}.")
            yield self.endpoint.stream_error(call.error)
        finally:
            # Handed over before anything else is awaited, so no cancellation can lose it.
            written = self.settle_stream(reader, forwarded)
            await response.aclose()
            if written is not None and call.http_status == 502:
                await asyncio.shield(written)  # the error event ends the answer once settled

    def settle_stream(self, reader: EventReader, forwarded: dict) -> asyncio.Future | None:
        call = self.record
        call.response_model = reader.model
        call.output_text = reader.text
        call.finish_reason = reader.finish_reason
        usage = reader.reported_usage()
        if usage is not None:
            self.record_usage(usage, forwarded)
            call.cost_micros = self._cost()
        else:  # cut short: the input as reported so far (Anthropic's message_start), else
            # estimated from the prompt as its reservation was; the output what came through
            prompt = reader.input_usage() or self.endpoint.prompt_usage(forwarded)
            came = reader.output_tokens_estimate()
            self.record_usage(prompt._replace(output_tokens=came), forwarded)
            call.cost_micros = min(self._cost(), self.admission.reserved_micros)
        return self.finish_after_answer(hurry=bool(call.error))
