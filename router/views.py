"""The router's endpoints under /api/v1: OpenAI's `chat/completions`, `completions`,
`embeddings` and `responses`, Anthropic's `messages` (`router.endpoints`), `GET models`, and
any other path (404 unless the operator lets it through, `router.passthrough`).

Async views, kept thin: they read the request, refuse what is malformed, and hand the call to
its lifecycle (`router.calls`: admitted against the run's cap, forwarded, settled and
recorded as a span). A call waits on the upstream without holding a thread, and a stream's
server-sent events pass through as they arrive.
"""

import time

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from belvedir.authentication import bearer_token
from router import calls, passthrough
from router.calls import error_response, refused
from router.endpoints import ENDPOINTS, Endpoint
from router.http import MAX_BODY_BYTES, body_bytes, openai_errors
from router.selectors import covered_models_list
from router.services import (
    CallRecord,
    RouterRefusal,
    off_loop,
    run_key_authenticate,
)
from traces import otlp

_authenticate = off_loop(run_key_authenticate)


def _token(request) -> str:
    """The caller's key: a bearer token, or Anthropic's `x-api-key` header."""
    return bearer_token(request) or request.headers.get("x-api-key", "").strip()


def _record(endpoint: Endpoint, body: dict, started: int) -> CallRecord:
    return CallRecord(
        model=endpoint.model(body),
        messages=endpoint.span_messages(body),
        started_ns=started,
        operation=endpoint.operation,
    )


async def _refused_traced(request, endpoint, started: int, refusal: RouterRefusal, body=None):
    """A call refused before it could be admitted (its body): answered after its key, and
    traced in the key's run when it is a run key."""
    try:
        key, run = await _authenticate(token=_token(request))
    except RouterRefusal as exc:
        return refused(exc)
    call = _record(endpoint, body if isinstance(body, dict) else {}, started)
    call.trace_parent = otlp.trace_parent_of(request.headers.get("traceparent"))
    await calls.record_refused((key, run.pk), call, refusal)
    return refused(refusal)


def endpoint_view(endpoint: Endpoint):
    """The view of one endpoint (`router.endpoints`)."""

    @csrf_exempt
    @openai_errors
    async def view(request):
        if request.method != "POST":
            return error_response(
                405, "Use POST.", type="invalid_request_error", code="method_not_allowed"
            )
        return await _call(request, endpoint)

    view.__name__ = view.__qualname__ = endpoint.path.replace("/", "_")
    return view


async def _call(request, endpoint: Endpoint):
    started = time.time_ns()
    try:
        raw = body_bytes(request)
        body = calls.checked_body(raw, limit=MAX_BODY_BYTES, endpoint=endpoint)
    except calls.BodyRefused as exc:
        return await _refused_traced(request, endpoint, started, exc.refusal, exc.body)
    call = _record(endpoint, body, started)
    call.trace_parent = otlp.trace_parent_of(request.headers.get("traceparent"))
    call.streamed = endpoint.streams and bool(body.get("stream"))
    served_by_asgi = isinstance(request, ASGIRequest)
    if call.streamed and not served_by_asgi:
        message = "Streaming needs the ASGI server (uvicorn belvedir.asgi:application)."
        return error_response(501, message, type="server_error", code="streaming_needs_asgi")
    try:
        admitted = await calls.admit(
            _token(request), call.model, body, call, asgi=served_by_asgi, endpoint=endpoint
        )
    except RouterRefusal as exc:
        if exc.caller is not None:
            await calls.record_refused(exc.caller, call, exc)
        return refused(exc)
    admitted.headers = endpoint.upstream_headers(
        request.headers, covered=admitted.admission.covered
    )
    forwarded = calls.forwarded_body(admitted.admission, body, endpoint)
    if call.streamed:
        return await admitted.stream(forwarded)
    target = admitted.admission.target
    if served_by_asgi:
        return await admitted.complete(forwarded, target.client(), settle_later=True)
    # WSGI: this request's event loop ends with it, so it settles before answering.
    async with target.new_client() as http:
        return await admitted.complete(forwarded, http, settle_later=False)


@csrf_exempt
@openai_errors
async def models(request):
    """The covered models, for a run's key (belvedir/urls.py gives a POST on the same path to
    models_registry's upload)."""
    if request.method != "GET":
        return error_response(
            405, "Use GET.", type="invalid_request_error", code="method_not_allowed"
        )
    try:
        key, run = await _authenticate(token=_token(request))
    except RouterRefusal as exc:
        return refused(exc)
    data = await off_loop(covered_models_list)(run=run)
    return JsonResponse({"object": "list", "data": data})


chat_completions = endpoint_view(ENDPOINTS["chat/completions"])
served = {path: endpoint_view(endpoint) for path, endpoint in ENDPOINTS.items()}


@csrf_exempt
@openai_errors
async def unknown(request, rest: str):
    """A path the router does not serve: 404, or passed through untraced and unmetered when
    the operator allows it (BELVEDIR_ROUTER_PASSTHROUGH)."""
    if not settings.BELVEDIR_ROUTER_PASSTHROUGH:
        message = f"The router does not serve /api/v1/{rest}."
        return error_response(404, message, type="invalid_request_error", code="unknown_url")
    try:
        key, run = await _authenticate(token=_token(request))
    except RouterRefusal as exc:
        return refused(exc)
    return await passthrough.forward(request, rest, run, body_bytes(request))
