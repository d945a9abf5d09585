"""`POST /api/v1/chat/completions` and `GET /api/v1/models`, OpenAI-compatible.

Async views: a call waits on the upstream (`router.upstream`) without holding a thread, and a
stream's server-sent events pass through as they arrive. Every call is admitted (run key, run
running and covered, worst case reserved), forwarded, settled and recorded as a span.
"""

import asyncio
import functools
import json
import logging
import time

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from belvedir.authentication import bearer_token
from billing.spend import spend_reserve_async
from models_registry.api import FineTunedModelUploadView
from router import upstream
from router.pricing import (
    choices_problem,
    cost_micros,
    forwarded_fields,
    output_tokens_limit,
    prompt_tokens_estimate,
    refused_field,
)
from router.services import (
    Admission,
    CallRecord,
    RouterRefusal,
    Settlement,
    admission_cached,
    call_admit,
    off_loop,
    refused_reservation,
    run_key_authenticate,
)
from router.settlement import settler
from router.sse import StreamReader
from runs.model_access import covered_models_allowed
from runs.models import Run
from runs.selectors import run_covered_models
from traces import otlp

MAX_BODY_BYTES = 8 * 2**20

log = logging.getLogger(__name__)

_call_admit = off_loop(call_admit)
_refused_reservation = off_loop(refused_reservation)
_authenticate = off_loop(run_key_authenticate)
_upload_fine_tuned = sync_to_async(FineTunedModelUploadView.as_view())


def error_response(
    status: int, message: str, *, type: str, code: str | None = None, param: str | None = None
) -> JsonResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JsonResponse(body, status=status)


def _refused(exc: RouterRefusal) -> JsonResponse:
    return error_response(exc.status, exc.message, type=exc.type, code=exc.code, param=exc.param)


async def _refused_traced(request, started: int, refusal: RouterRefusal, body=None):
    """A call refused before it could be admitted (its body): answered after its key, and
    traced in the key's run when it is a run key."""
    try:
        key, run = await _authenticate(token=bearer_token(request) or "")
    except RouterRefusal as exc:
        return _refused(exc)
    body = body if isinstance(body, dict) else {}
    model = body.get("model") if isinstance(body.get("model"), str) else ""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    call = CallRecord(model=model, messages=messages, started_ns=started)
    call.trace_parent = otlp.trace_parent_of(request.headers.get("traceparent"))
    call.http_status, call.error, call.ended_ns = refusal.status, refusal.message, time.time_ns()
    await settler().settle(Settlement(key, run.pk, call))
    return _refused(refusal)


# The upstream refusing the platform's own account (its key, its credits): not the caller's
# doing, so not answered as if it were (the upstream's text goes to the span only).
UPSTREAM_ACCOUNT_STATUSES = frozenset({401, 402, 403})


def _upstream_error(status: int, content: bytes) -> tuple[JsonResponse, int, str]:
    """The upstream's error as the router answers it, OpenAI-style: its status and message,
    or a 502 for a refusal of the platform's account; with the status and the upstream's own
    message, for the span."""
    try:
        document = json.loads(content)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("error"), dict):
        error = document["error"]
        message = str(error.get("message") or f"The upstream answered {status}.")
        kind, code = str(error.get("type") or "upstream_error"), error.get("code")
    else:
        text = content.decode("utf-8", "replace")[:500]
        message, kind, code = f"The upstream answered {status}: {text}", "upstream_error", None
    if status in UPSTREAM_ACCOUNT_STATUSES:
        answer = error_response(
            502,
            "The platform's model upstream refused the call.",
            type="upstream_error",
            code="upstream_refused",
        )
        return answer, 502, f"The upstream answered {status}: {message}"
    return error_response(status, message, type=kind, code=code), status, message


def _forwarded_body(admission: Admission, body: dict) -> dict:
    forwarded = dict(body)
    # Both limits, whichever the upstream reads: what was reserved for is all it may produce.
    limit = output_tokens_limit(admission.price, body)
    forwarded["max_tokens"] = forwarded["max_completion_tokens"] = limit
    for name, budget in (("reasoning", "max_tokens"), ("thinking", "budget_tokens")):
        _cap_budget(forwarded, name, budget, limit)
    if body.get("stream"):
        options = forwarded.get("stream_options")
        forwarded["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
    return forwarded


def _cap_budget(forwarded: dict, name: str, budget: str, limit: int) -> None:
    """A reasoning budget (OpenRouter's `reasoning.max_tokens`, Anthropic's
    `thinking.budget_tokens`) never past the output limit (reasoning is output)."""
    options = forwarded.get(name)
    if isinstance(options, dict) and isinstance(options.get(budget), int):
        forwarded[name] = {**options, budget: min(options[budget], limit)}


def _settlement(admission: Admission, call: CallRecord) -> Settlement | None:
    """The call's settlement, the first time it is asked for; None after (a call settles at
    most once, whatever path its cancellation takes)."""
    if call.settled:
        return None
    call.settled = True
    call.ended_ns = call.ended_ns or time.time_ns()
    return Settlement.of(admission, call)


async def _finish(admission: Admission, call: CallRecord) -> None:
    """Settle the call and record its span before answering, even when the request task is
    being cancelled (`router.settlement`: written with whatever else is pending)."""
    settlement = _settlement(admission, call)
    if settlement is not None:
        await settler().settle(settlement)


def _finish_after_answer(admission: Admission, call: CallRecord, *, hurry: bool = False):
    """Settle after the answer went out, in the next batch: the reservation keeps the cap safe
    meanwhile. The future is done once it is written (None when it was settled already)."""
    settlement = _settlement(admission, call)
    if settlement is None:
        return None
    return settler().submit(settlement, hurry=hurry)


def _charge_if_sent(admission: Admission, call: CallRecord) -> None:
    """No usage came back: once the request reached the upstream, the upstream may bill it
    (a dropped connection does not stop a non-streamed completion), so the call costs its
    reserved worst case; a request that never left (a connect error) costs nothing."""
    if call.sent:
        call.cost_micros = admission.reserved_micros


def _traced(call: CallRecord) -> dict:
    """httpx's extensions marking `call.sent` once the request's first byte is written."""

    async def trace(event: str, info: dict) -> None:
        if event.endswith("send_request_headers.started"):
            call.sent = True

    return {"trace": trace}


async def _admit_or_flush(
    token: str, model: str, body: dict, call: CallRecord, *, asgi: bool
) -> Admission:
    """Admit the call; one refused for its run's cap while calls of that run wait to be settled
    (their reservations still held) is tried again once they are."""
    try:
        return await _admit(token, model, body, call, asgi=asgi)
    except RouterRefusal as exc:
        pending = exc.caller is not None and settler().pending_for(exc.caller[1])
        if exc.code != "spend_cap_reached" or not pending:
            raise
    await settler().flush()
    return await _admit(token, model, body, call, asgi=asgi)


async def _admit(token: str, model: str, body: dict, call: CallRecord, *, asgi: bool) -> Admission:
    """Admitted from this process's cached lookups and reserved from the event loop (one
    round trip; served by ASGI, whose event loop lives as long as the process)
    when it can be; else everything in a worker thread through the ORM."""
    cached = admission_cached(token=token, model=model, body=body)
    if cached is None or not asgi:
        admitting = asyncio.ensure_future(_call_admit(token=token, model=model, body=body))
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
    if await spend_reserve_async(
        account=Run, account_id=admission.run_id, amount=admission.reserved_micros
    ):
        return admission
    return None


def _release_abandoned(call: CallRecord, admitting: asyncio.Future) -> None:
    """An admission whose client left while it was being made: released, and traced."""
    if admitting.cancelled() or admitting.exception() is not None or admitting.result() is None:
        return
    call.http_status, call.error = 499, "The client disconnected."
    _finish_after_answer(admitting.result(), call, hurry=True)


def _openai_errors(view):
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


def _body_bytes(request) -> bytes | None:
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


@csrf_exempt
@_openai_errors
async def chat_completions(request):
    if request.method != "POST":
        return error_response(
            405, "Use POST.", type="invalid_request_error", code="method_not_allowed"
        )
    started = time.time_ns()
    raw = _body_bytes(request)
    if raw is None:
        message = f"The request body is over {MAX_BODY_BYTES // 2**20} MB."
        refusal = RouterRefusal(413, message, type="invalid_request_error", code="body_too_large")
        return await _refused_traced(request, started, refusal)
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        message = "The body must be a JSON object with messages."
        refusal = RouterRefusal(400, message, type="invalid_request_error", code=None)
        return await _refused_traced(request, started, refusal, body)
    refused = refused_field(body)
    if refused is not None:
        message = (
            f"The router does not take {refused!r}: it would change which model serves the "
            "call or what it is billed. Call the run's model directly, without it."
        )
        refusal = RouterRefusal(
            400, message, type="invalid_request_error", code="unsupported_field", param=refused
        )
        return await _refused_traced(request, started, refusal, body)
    body = forwarded_fields(body)  # what is reserved for is what is forwarded
    problem = choices_problem(body)
    if problem is not None:
        refusal = RouterRefusal(400, problem, type="invalid_request_error", code=None, param="n")
        return await _refused_traced(request, started, refusal, body)
    model = body.get("model") if isinstance(body.get("model"), str) else ""
    call = CallRecord(model=model, messages=body["messages"], started_ns=started)
    call.trace_parent = otlp.trace_parent_of(request.headers.get("traceparent"))
    call.streamed = bool(body.get("stream"))
    served_by_asgi = isinstance(request, ASGIRequest)
    if call.streamed and not served_by_asgi:
        message = "Streaming needs the ASGI server (uvicorn belvedir.asgi:application)."
        return error_response(501, message, type="server_error", code="streaming_needs_asgi")
    try:
        if not settings.BELVEDIR_ROUTER_UPSTREAM_KEY:
            key, run = await _authenticate(token=bearer_token(request) or "")
            raise RouterRefusal(
                503,
                "The platform has no model upstream configured.",
                type="server_error",
                code=None,
                run=(key, run.pk),
            )
        admission = await _admit_or_flush(
            bearer_token(request) or "", model, body, call, asgi=served_by_asgi
        )
    except RouterRefusal as exc:
        if exc.caller is not None:
            call.http_status, call.error, call.ended_ns = exc.status, exc.message, time.time_ns()
            await settler().settle(Settlement(exc.caller[0], exc.caller[1], call))
        return _refused(exc)
    forwarded = _forwarded_body(admission, body)
    if call.streamed:
        return await _stream(admission, call, forwarded)
    if served_by_asgi:
        return await _complete(admission, call, forwarded, upstream.client(), settle_later=True)
    # WSGI: this request's event loop ends with it, so it settles before answering.
    async with upstream.new_client() as http:
        return await _complete(admission, call, forwarded, http, settle_later=False)


async def _failed(admission: Admission, call: CallRecord, status: int, message: str, response):
    call.http_status, call.error = status, message
    await _finish(admission, call)
    return response


async def _send(admission: Admission, call: CallRecord, sending) -> httpx.Response | JsonResponse:
    """The upstream's response; or, when none came, the error answer (the call settled)."""
    try:
        return await sending
    except httpx.TimeoutException:
        _charge_if_sent(admission, call)
        message = "The upstream did not answer in time."
        answer = error_response(504, message, type="upstream_error", code="timeout")
        return await _failed(admission, call, 504, message, answer)
    except httpx.HTTPError as exc:
        _charge_if_sent(admission, call)
        message = f"The upstream could not be reached: {type(exc).__name__}."
        answer = error_response(502, message, type="upstream_error")
        return await _failed(admission, call, 502, message, answer)
    except asyncio.CancelledError:  # the client went away before the answer
        _charge_if_sent(admission, call)
        call.http_status, call.error = 499, "The client disconnected."
        await _finish(admission, call)
        raise


async def _complete(
    admission: Admission,
    call: CallRecord,
    forwarded: dict,
    http: httpx.AsyncClient,
    *,
    settle_later: bool,
):
    response = await _send(
        admission,
        call,
        http.post(
            upstream.url("chat/completions"),
            json=forwarded,
            headers=upstream.headers(),
            extensions=_traced(call),
        ),
    )
    if isinstance(response, JsonResponse):
        return response
    if response.status_code >= 400:
        reply, status, message = _upstream_error(response.status_code, response.content)
        return await _failed(admission, call, status, message, reply)
    try:
        document = response.json()
    except ValueError:
        document = None
    if not isinstance(document, dict):
        message = "The upstream answered with something that is not JSON."
        call.cost_micros = admission.reserved_micros  # it may have billed us: assume the worst
        return await _failed(
            admission, call, 502, message, error_response(502, message, type="upstream_error")
        )
    _read_completion(admission, call, document)
    if settle_later:
        _finish_after_answer(admission, call)
    else:
        await _finish(admission, call)
    return HttpResponse(
        response.content, status=response.status_code, content_type="application/json"
    )


def _read_completion(admission: Admission, call: CallRecord, document: dict) -> None:
    usage = document.get("usage") if isinstance(document.get("usage"), dict) else None
    call.response_model = str(document.get("model") or "")
    choices = document.get("choices") or []
    if choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or {}
        call.output_text = str(message.get("content") or "") if isinstance(message, dict) else ""
        call.finish_reason = str(choices[0].get("finish_reason") or "")
    if usage is None:  # no usage: charge the worst case reserved
        call.cost_micros = admission.reserved_micros
        return
    call.input_tokens = _tokens(usage.get("prompt_tokens"))
    call.output_tokens = _tokens(usage.get("completion_tokens"))
    call.cost_micros = _cost(admission, call)


def _cost(admission: Admission, call: CallRecord) -> int:
    return cost_micros(
        admission.price, input_tokens=call.input_tokens or 0, output_tokens=call.output_tokens or 0
    )


def _tokens(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


async def _stream(admission: Admission, call: CallRecord, forwarded: dict):
    http = upstream.client()
    request = http.build_request(
        "POST",
        upstream.url("chat/completions"),
        json=forwarded,
        headers=upstream.headers(),
        extensions=_traced(call),
    )
    response = await _send(admission, call, http.send(request, stream=True))
    if isinstance(response, JsonResponse):
        return response
    if response.status_code >= 400:
        content = await response.aread()
        await response.aclose()
        reply, status, message = _upstream_error(response.status_code, content)
        return await _failed(admission, call, status, message, reply)
    streamed = StreamingHttpResponse(
        _relay(admission, call, response, forwarded), content_type="text/event-stream"
    )
    streamed["Cache-Control"] = "no-cache"
    streamed["X-Accel-Buffering"] = "no"
    return streamed


async def _relay(admission: Admission, call: CallRecord, response: httpx.Response, forwarded: dict):
    """Pass the upstream's events through as they come; the call is settled once they end
    (with the next batch), or at once when the client leaves or the upstream stream breaks."""
    reader = StreamReader()
    try:
        async for chunk in response.aiter_raw():
            reader.feed(chunk)
            yield chunk
    except (asyncio.CancelledError, GeneratorExit):  # cancelled, or closed at a yield
        call.http_status, call.error = 499, "The client disconnected mid-stream."
        raise
    except httpx.HTTPError as exc:
        call.http_status, call.error = 502, f"The upstream stream broke: {type(exc).__name__}."
        event = {
            "error": {"message": call.error, "type": "upstream_error", "param": None, "code": None}
        }
        yield f"data: {json.dumps(event)}\n\n".encode()
    finally:
        # Handed over before anything else is awaited, so no cancellation can lose it.
        written = _settle_stream(admission, call, reader, forwarded)
        await response.aclose()
        if written is not None and call.http_status == 502:
            await asyncio.shield(written)  # the error event ends the answer once it is settled


def _settle_stream(
    admission: Admission, call: CallRecord, reader: StreamReader, forwarded: dict
) -> asyncio.Future | None:
    call.response_model = reader.model
    call.output_text = reader.text
    call.finish_reason = reader.finish_reason
    if reader.usage is not None:
        call.input_tokens = _tokens(reader.usage.get("prompt_tokens"))
        call.output_tokens = _tokens(reader.usage.get("completion_tokens"))
        call.cost_micros = _cost(admission, call)
    else:  # cut short: what was used, estimated from the prompt and what came through
        call.input_tokens = prompt_tokens_estimate(forwarded)
        call.output_tokens = reader.output_tokens_estimate()
        call.cost_micros = min(_cost(admission, call), admission.reserved_micros)
    return _finish_after_answer(admission, call, hurry=bool(call.error))


@csrf_exempt
@_openai_errors
async def models(request):
    """The covered models, for a run's key. A POST is a fine-tuned model's upload (the REST
    API of models_registry shares the path)."""
    if request.method == "POST":
        return await _upload_fine_tuned(request)
    if request.method != "GET":
        return error_response(
            405, "Use GET.", type="invalid_request_error", code="method_not_allowed"
        )
    try:
        key, run = await _authenticate(token=bearer_token(request) or "")
    except RouterRefusal as exc:
        return _refused(exc)
    data = await off_loop(_model_list)(run)
    return JsonResponse({"object": "list", "data": data})


def _model_list(run) -> list[dict]:
    """The covered models this run may call: its own model and judge when covered, no
    Chinese lab's for a project without the permission."""
    if not run.covered:
        return []
    own = run_covered_models(run)
    return [
        {
            "id": entry.model_id,
            "object": "model",
            "created": 0,
            "owned_by": entry.lab.name,
            "name": entry.display_name,
            "pricing": {
                "input_micros_per_mtok": entry.input_price_micros,
                "output_micros_per_mtok": entry.output_price_micros,
            },
            "max_output_tokens": entry.max_output_tokens,
        }
        for entry in covered_models_allowed(project=run.project)
        if entry.model_id in own
    ]
