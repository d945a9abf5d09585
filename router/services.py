"""The router's writes: admitting a call (its key, its run, the worst case reserved against the
run's cap), settling it, and recording it as an LLM span in the run's session.

Synchronous (the async views call them through `sync_to_async`). Reserving is one conditional
UPDATE of the run's row, which PostgreSQL applies under the row's lock and re-checks against
the row as the previous holder left it: concurrent calls never reserve past the cap together.
"""

import dataclasses
import hashlib
import json
import secrets
import time

from django.db import close_old_connections, transaction
from django.db.models import F

from belvedir.errors import Invalid
from belvedir.models import ApiKey
from belvedir.services import api_key_authenticate
from router.pricing import Price, price_for, worst_case_micros
from runs.model_access import covered_model_check
from runs.models import Run, Status
from runs.selectors import run_of_key
from traces import otlp
from traces.services.ingest import spans_ingest

PROVIDER = "belvedir.router"
# A run key's run and a model's price are looked up once per this many seconds (per process):
# a call's own check is the reserving UPDATE, which refuses a run that stopped or is not
# covered, so a cached lookup can never let a call past the cap or into a finished run.
LOOKUP_TTL_SECONDS = 5.0
_MAX_CACHED = 4096
_keys: dict[str, tuple[float, ApiKey, Run]] = {}
_prices: dict[str, tuple[float, Price | None]] = {}
_refusals: dict[tuple[str, str], tuple[float, str | None]] = {}


class RouterRefusal(Exception):
    """A call refused before forwarding, answered as an OpenAI-style error."""

    def __init__(self, status: int, message: str, *, type: str, code: str | None, run=None):
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type, code
        # (key, run id) once the caller is known: the refusal is then traced in its run too
        self.caller: tuple[ApiKey, str] | None = run


@dataclasses.dataclass
class Admission:
    key: ApiKey
    run_id: str
    price: Price
    reserved_micros: int


def run_key_authenticate(*, token: str) -> tuple[ApiKey, Run]:
    """The run key and its run; 401 for an unknown or revoked key, 403 for a project key."""
    close_old_connections()
    digest = hashlib.sha256((token or "").encode()).hexdigest()
    cached = _keys.get(digest)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1], cached[2]
    key = api_key_authenticate(token or "")
    if key is None:
        raise RouterRefusal(
            401,
            "Unknown or revoked API key.",
            type="invalid_request_error",
            code="invalid_api_key",
        )
    run = run_of_key(key)
    if run is None:
        raise RouterRefusal(
            403,
            "The router serves runs: call it with the run's key (MODEL_API_KEY in the sandbox).",
            type="invalid_request_error",
            code="run_key_required",
        )
    if len(_keys) >= _MAX_CACHED:
        _keys.clear()
    _keys[digest] = (time.monotonic() + LOOKUP_TTL_SECONDS, key, run)
    return key, run


def _price(model: str) -> Price | None:
    cached = _prices.get(model)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    price = price_for(model) if model else None
    if len(_prices) >= _MAX_CACHED:
        _prices.clear()
    _prices[model] = (time.monotonic() + LOOKUP_TTL_SECONDS, price)
    return price


def call_admit(*, token: str, model: str, body: dict) -> Admission:
    """Admit a call of a running, covered run and reserve its worst-case cost."""
    key, run = run_key_authenticate(token=token)
    price = _price(model)
    if price is None:
        raise RouterRefusal(
            404,
            f"The model {model!r} is not one the platform covers.",
            type="invalid_request_error",
            code="model_not_found",
            run=(key, run.pk),
        )
    refused = _project_refusal(run=run, model=model)
    if refused is not None:
        raise _refusal(403, refused, key, run, "model_not_allowed")
    amount = worst_case_micros(price, body)
    reserved = Run.objects.filter(
        pk=run.pk,
        status=Status.RUNNING,
        covered=True,
        covered_cap_micros__gte=F("covered_reserved_micros") + F("covered_spent_micros") + amount,
    ).update(covered_reserved_micros=F("covered_reserved_micros") + amount)
    if not reserved:
        raise _refused_reservation(key, run.pk, amount)
    return Admission(key=key, run_id=run.pk, price=price, reserved_micros=amount)


def _project_refusal(*, run: Run, model: str) -> str | None:
    """Why the run's project may not have the platform pay for `model` (the launch's own check:
    a Chinese lab's model needs the project's permission), or None; cached like the prices."""
    cache_key = (run.project_id, model)
    cached = _refusals.get(cache_key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    try:
        covered_model_check(project=run.project, model=model)
        why = None
    except Invalid as exc:
        why = exc.message
    if len(_refusals) >= _MAX_CACHED:
        _refusals.clear()
    _refusals[cache_key] = (time.monotonic() + LOOKUP_TTL_SECONDS, why)
    return why


def _refused_reservation(key: ApiKey, run_id: str, amount: int) -> RouterRefusal:
    """Why the run could not reserve `amount`: not covered, not running, or its cap."""
    run = Run.objects.get(pk=run_id)
    if not run.covered:
        message = "This run's model usage is not covered by the platform."
        return _refusal(403, message, key, run, "run_not_covered")
    if run.status != Status.RUNNING:
        return _refusal(403, f"The run is {run.status}, not running.", key, run, "run_not_running")
    return RouterRefusal(
        402,
        f"The run's covered spend cap of ${run.covered_cap_micros / 1e6:.2f} is reached "
        f"(spent ${run.covered_spent_micros / 1e6:.4f}; this call may cost up to "
        f"${amount / 1e6:.4f}).",
        type="insufficient_quota",
        code="spend_cap_reached",
        run=(key, run.pk),
    )


def _refusal(status: int, message: str, key: ApiKey, run: Run, code: str) -> RouterRefusal:
    return RouterRefusal(
        status, message, type="invalid_request_error", code=code, run=(key, run.pk)
    )


@dataclasses.dataclass
class CallRecord:
    """One router call, as its span records it."""

    model: str
    messages: list
    started_ns: int
    ended_ns: int = 0
    response_model: str = ""
    output_text: str = ""
    finish_reason: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_micros: int = 0
    streamed: bool = False
    http_status: int = 200
    error: str = ""


def call_settle(*, admission: Admission, call: CallRecord) -> None:
    """Record the call, release its reservation and add what it cost to the run's spend, in one
    transaction. The run's row is updated last, so its lock (which every call of the run
    needs to reserve) is held only from that UPDATE to the commit."""
    close_old_connections()
    with transaction.atomic():
        _span_store(key=admission.key, run_id=admission.run_id, call=call)
        Run.objects.filter(pk=admission.run_id).update(
            covered_reserved_micros=F("covered_reserved_micros") - admission.reserved_micros,
            covered_spent_micros=F("covered_spent_micros") + max(call.cost_micros, 0),
        )


def call_record(*, key: ApiKey, run_id: str, call: CallRecord) -> None:
    """Record a call that reserved nothing (a refusal) in the run's session."""
    close_old_connections()
    _span_store(key=key, run_id=run_id, call=call)


def _span_store(*, key: ApiKey, run_id: str, call: CallRecord) -> None:
    """Store the call as an LLM span in the run's session (session id = the run's id)."""
    attributes = {
        "session.id": run_id,
        "traceloop.span.kind": "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": call.model,
        "gen_ai.input.messages": json.dumps(
            call.messages if isinstance(call.messages, list) else []
        ),
        "belvedir.router.cost_micros": call.cost_micros,
        "belvedir.router.cost_usd": call.cost_micros / 1e6,
        "belvedir.router.streamed": call.streamed,
        "http.response.status_code": call.http_status,
    }
    if call.response_model:
        attributes["gen_ai.response.model"] = call.response_model
    if call.output_text or call.finish_reason:
        output = {"role": "assistant", "content": call.output_text}
        if call.finish_reason:
            output["finish_reason"] = call.finish_reason
            attributes["gen_ai.response.finish_reasons"] = [call.finish_reason]
        attributes["gen_ai.output.messages"] = json.dumps([output])
    if call.input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = call.input_tokens
    if call.output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = call.output_tokens
    if call.error:
        attributes["error.type"] = str(call.http_status)
    span = otlp.SpanIn(
        trace_id=secrets.token_hex(16),
        span_id=secrets.token_hex(8),
        parent_span_id="",
        name=f"chat {call.model}"[:500],
        kind="client",
        start_ns=call.started_ns,
        end_ns=max(call.ended_ns, call.started_ns),
        attributes=attributes,
        events=[],
        status_code="error" if call.error else "ok",
        status_message=call.error[:1000],
        resource_attributes={"service.name": PROVIDER},
        scope_name=PROVIDER,
    )
    spans_ingest(key=key, spans=[span])
