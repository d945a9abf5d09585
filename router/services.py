"""The router's writes: admitting a call (its key, its run, the worst case reserved against the
run's cap), settling it, and recording it as an LLM span in the run's session.

Synchronous (the async views call them through `off_loop`; `router.settlement` batches
the settling). The money is billing's: a call's worst case is reserved against the run's cap
and settled by `billing.spend` (the router never writes the run's money columns itself).
"""

import dataclasses
import functools
import hashlib
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction

from belvedir.errors import Invalid
from belvedir.models import ApiKey
from belvedir.services import api_key_authenticate
from belvedir.text import usd
from billing.pricing import Price, Usage, usage_cost_micros
from billing.spend import Charge, spend_reserve, spend_settle
from router.endpoints import CHAT, Endpoint
from router.pricing import choices_problem, price_for
from router.spans import call_span
from router.targets import Target, covered_target, own_prefix, own_target
from runs.model_access import covered_model_check
from runs.models import Run, Status
from runs.selectors import run_covered_models, run_of_key
from traces.services.ingest import spans_ingest


def off_loop(fn):
    """`fn` for the async views: run in a thread of the event loop's executor, whose database
    connection is given back as the call ends. Those threads live on between calls, and in the
    web process the connection goes back to its pool (settings' BELVEDIR_DB_POOL): held until
    the thread's next call, each would keep one of the pool's connections from the pages."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=False)


# A run key's run and a model's price are looked up once per this many seconds (per process):
# a call's own check is the reserving UPDATE, which refuses a run that stopped or is not
# covered, so a cached lookup can never let a call past the cap or into a finished run.
LOOKUP_TTL_SECONDS = 5.0
_MAX_CACHED = 4096
_keys: dict[str, tuple[float, tuple[ApiKey, Run]]] = {}
_prices: dict[str, tuple[float, Price | None]] = {}
_refusals: dict[tuple[str, str], tuple[float, str | None]] = {}
_targets: dict[tuple[str, str], tuple[float, Target]] = {}


class RouterRefusal(Exception):
    """A call refused before forwarding, answered as an OpenAI-style error."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str,
        code: str | None,
        run=None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type, code
        self.param = param  # the body's field at fault, if one is
        # (key, run id) once the caller is known: the refusal is then traced in its run too
        self.caller: tuple[ApiKey, str] | None = run


@dataclasses.dataclass
class Admission:
    """An admitted call: its run, its price (None: an own-key call of a model the catalog does
    not price), what it reserved, where it goes, and the body to forward (a covered call's
    with the fields the router takes; an own-key call's as the harness sent it)."""

    key: ApiKey
    run_id: str
    price: Price | None
    reserved_micros: int
    target: Target = dataclasses.field(default_factory=covered_target)
    body: dict | None = None

    @property
    def covered(self) -> bool:
        return self.target.covered


def _fresh(cache: dict, name):
    """(True, the cached value) while it is fresh, else (False, None)."""
    found = cache.get(name)
    if found is not None and found[0] > time.monotonic():
        return True, found[1]
    return False, None


def _remember(cache: dict, name, value) -> None:
    if len(cache) >= _MAX_CACHED:
        cache.clear()
    cache[name] = (time.monotonic() + LOOKUP_TTL_SECONDS, value)


def _digest(token: str) -> str:
    return hashlib.sha256((token or "").encode()).hexdigest()


def run_key_authenticate(*, token: str) -> tuple[ApiKey, Run]:
    """The run key and its run; 401 for an unknown or revoked key, 403 for a project key."""
    close_old_connections()
    fresh, found = _fresh(_keys, _digest(token))
    if fresh:
        return found
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
    _remember(_keys, _digest(token), (key, run))
    return key, run


def _price(model: str) -> Price | None:
    fresh, price = _fresh(_prices, model)
    if not fresh:
        price = price_for(model) if model else None
        _remember(_prices, model, price)
    return price


def covered_body(body: dict, *, run: tuple[ApiKey, str], endpoint: Endpoint = CHAT) -> dict:
    """A covered call's body with only the fields the router forwards for its endpoint (what
    is reserved for is what is forwarded; issue 15's allow-list, one per API); refused for a
    field the router refuses or a choice count it cannot serve (traced in `run`)."""
    field = endpoint.refused_field(body)
    if field is not None:
        message = (
            f"The router does not take {field!r}: it would change which model serves the "
            "call or what it is billed. Call the run's model directly, without it."
        )
        raise RouterRefusal(
            400,
            message,
            type="invalid_request_error",
            code="unsupported_field",
            param=field,
            run=run,
        )
    part = endpoint.unmeasured_part(body)
    if part is not None:
        message = (
            f"The router does not take this {part!r} on a covered call: it holds input the "
            "provider fetches or multiplies itself (a file or document by URL or id, a stored "
            "item, several prompts), which the run's reservation cannot measure. Send the "
            "content itself, one prompt a call."
        )
        raise RouterRefusal(
            400,
            message,
            type="invalid_request_error",
            code="unmeasured_input",
            param=part,
            run=run,
        )
    body = endpoint.forwarded_fields(body)
    problem = choices_problem(body)
    if problem is not None:
        raise RouterRefusal(
            400, problem, type="invalid_request_error", code=None, param="n", run=run
        )
    return body


def _target(run: Run, model: str) -> Target | None:
    """The own-key target of a call of `model` in `run` (cached like the keys), or None for a
    covered call."""
    prefix = own_prefix(run, model)
    if prefix is None:
        return None
    fresh, found = _fresh(_targets, (run.pk, prefix))
    if not fresh:
        found = own_target(run, prefix)
        _remember(_targets, (run.pk, prefix), found)
    return found


def _own_admission(key: ApiKey, run: Run, target: Target, price, body) -> Admission:
    """An own-key call: nothing to reserve (it bills to the user's provider), the run running
    (as its key's lookup last saw it), its body forwarded as the harness sent it."""
    if run.status != Status.RUNNING:
        raise _refusal(403, f"The run is {run.status}, not running.", key, run, "run_not_running")
    return Admission(key, run.pk, price, 0, target=target, body=body)


def _admission(
    key: ApiKey, run: Run, model: str, price: Price | None, why, body, endpoint: Endpoint
) -> Admission:
    """The call's admission, to be reserved; or the refusal for a model not covered, not one of
    the run's own (its model and its judge), not allowed to the run's project (`why`), or a
    field the router does not take."""
    if not settings.BELVEDIR_ROUTER_UPSTREAM_KEY:
        raise _refusal(503, "The platform has no model upstream configured.", key, run, None)
    if price is None:
        raise RouterRefusal(
            404,
            f"The model {model!r} is not one the platform covers.",
            type="invalid_request_error",
            code="model_not_found",
            run=(key, run.pk),
        )
    allowed = run_covered_models(run)
    if run.covered and model not in allowed:  # (a run not covered: refused when reserving)
        names = " and ".join(sorted(allowed)) or "none"
        message = (
            f"This run's covered calls are for the models it was launched with ({names}), "
            f"not {model!r}."
        )
        raise _refusal(403, message, key, run, "model_not_for_run")
    if why is not None:
        raise _refusal(403, why, key, run, "model_not_allowed")
    body = covered_body(body, run=(key, run.pk), endpoint=endpoint)
    return Admission(
        key=key,
        run_id=run.pk,
        price=price,
        reserved_micros=endpoint.worst_case(price, body),
        body=body,
    )


def call_admit(*, token: str, model: str, body: dict, endpoint: Endpoint = CHAT) -> Admission:
    """Admit a call of a running run: an own-key one as it is, a covered one with its
    worst-case cost (as its endpoint bounds it) reserved."""
    key, run = run_key_authenticate(token=token)
    price = _price(model)
    target = _target(run, model)
    if target is not None:
        return _own_admission(key, run, target, price, body)
    why = _project_refusal(run=run, model=model) if price is not None else None
    admission = _admission(key, run, model, price, why, body, endpoint)
    if not spend_reserve(
        account=Run, account_id=admission.run_id, amount=admission.reserved_micros
    ):
        raise refused_reservation(key, run.pk, admission.reserved_micros)
    return admission


def admission_cached(
    *, token: str, model: str, body: dict, endpoint: Endpoint = CHAT
) -> Admission | None:
    """`call_admit`'s lookups from this process's caches alone, touching no database (so the
    event loop may call it): the admission still to reserve, or None when something must be
    looked up. Raises the refusals the caches already know."""
    fresh, found = _fresh(_keys, _digest(token))
    if not fresh:
        return None
    key, run = found
    fresh, price = _fresh(_prices, model)
    if not fresh:
        return None
    own = own_prefix(run, model)
    if own is not None:
        fresh, target = _fresh(_targets, (run.pk, own))
        return _own_admission(key, run, target, price, body) if fresh else None
    why = None
    if price is not None:
        fresh, why = _fresh(_refusals, (run.project_id, model))
        if not fresh:
            return None
    return _admission(key, run, model, price, why, body, endpoint)


def _project_refusal(*, run: Run, model: str) -> str | None:
    """Why the run's project may not have the platform pay for `model` (the launch's own check:
    a Chinese lab's model needs the project's permission), or None; cached like the prices."""
    fresh, why = _fresh(_refusals, (run.project_id, model))
    if fresh:
        return why
    try:
        covered_model_check(project=run.project, model=model)
        why = None
    except Invalid as exc:
        why = exc.message
    _remember(_refusals, (run.project_id, model), why)
    return why


def refused_reservation(key: ApiKey, run_id: str, amount: int) -> RouterRefusal:
    """Why the run could not reserve `amount`: not covered, not running, or its cap."""
    run = Run.objects.get(pk=run_id)
    if not run.covered:
        message = "This run's model usage is not covered by the platform."
        return _refusal(403, message, key, run, "run_not_covered")
    if run.status != Status.RUNNING:
        return _refusal(403, f"The run is {run.status}, not running.", key, run, "run_not_running")
    return RouterRefusal(
        402,
        f"The run's covered spend cap of {usd(run.covered_cap_micros)} is reached "
        f"(spent {usd(run.covered_spent_micros)}; this call may cost up to {usd(amount)}).",
        type="insufficient_quota",
        code="spend_cap_reached",
        run=(key, run.pk),
    )


def _refusal(status: int, message: str, key: ApiKey, run: Run, code: str | None) -> RouterRefusal:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return RouterRefusal(status, message, type=kind, code=code, run=(key, run.pk))


@dataclasses.dataclass
class CallRecord:
    """One router call, as its span records it."""

    model: str
    messages: list
    started_ns: int
    operation: str = "chat"  # gen_ai.operation.name: chat, text_completion, embeddings
    ended_ns: int = 0
    response_model: str = ""
    output_text: str = ""
    finish_reason: str = ""
    input_tokens: int | None = None  # all of the input, the prompt cache's included
    output_tokens: int | None = None
    # Of the input: read from the prompt cache, written to it for 5 minutes, for an hour.
    cache_tokens: tuple[int, int, int] = (0, 0, 0)
    cost_micros: int = 0
    streamed: bool = False
    http_status: int = 200
    error: str = ""
    # The request reached the upstream (its first byte was written): from then on the upstream
    # may bill it, answer or not.
    sent: bool = False
    # Its settlement was handed over: a call settles at most once.
    settled: bool = False
    # The client's W3C trace context (its `traceparent`: an SDK's span of this call), which
    # the call's span continues: (trace id, parent span id), or None.
    trace_parent: tuple[str, str] | None = None
    # An own-key call: billed to the user's provider, not the organization; what the catalog's
    # prices say it cost (None: a model the catalog does not price).
    billed_to_provider: bool = False
    estimated_cost_micros: int | None = None

    def use(self, usage: Usage, *, output: bool = True) -> None:
        """The call's tokens (`output`: its API produces output; embeddings do not)."""
        self.input_tokens, self.output_tokens = usage.input_tokens, usage.output_tokens
        self.output_tokens = self.output_tokens if output else None
        self.cache_tokens = (
            usage.cache_read_tokens,
            usage.cache_write_5m_tokens + usage.cache_write_tokens,
            usage.cache_write_1h_tokens,
        )

    def usage(self) -> Usage:
        read, five_minutes, hour = self.cache_tokens
        return Usage(self.input_tokens or 0, self.output_tokens or 0, read, five_minutes, hour)

    def fail(self, status: int, error: str) -> None:
        """The call ends in an error: its status and message, for its span."""
        self.http_status, self.error = status, error

    def end(self, status: int, error: str) -> None:
        """The call ends now, in an error (a refusal: it never reached the upstream)."""
        self.fail(status, error)
        self.ended_ns = time.time_ns()


@dataclasses.dataclass
class Settlement:
    """What a call leaves to write: its span, and (when it reserved) the release of its
    reservation and its cost added to the run's spend."""

    key: ApiKey
    run_id: str
    call: CallRecord
    reserved_micros: int = 0
    record_span: bool = True

    @classmethod
    def of(cls, admission: Admission, call: CallRecord) -> "Settlement":
        if not admission.covered:  # the user's provider bills it: charged nothing here
            call.billed_to_provider, call.cost_micros = True, 0
            if admission.price is not None:
                call.estimated_cost_micros = usage_cost_micros(admission.price, call.usage())
        return cls(admission.key, admission.run_id, call, admission.reserved_micros)


def calls_settle(settlements: list[Settlement]) -> None:
    """Record the calls as spans (one batch per key), release their reservations and add
    what they are charged to their runs' spend (`billing.spend.spend_settle`: each at most
    its reservation, the rest recorded as the upstream's excess), in one transaction.
    The runs' rows are updated last (in id order, so concurrent batches never deadlock):
    their locks, which every call of a run needs to reserve, are held only from those UPDATEs
    to the commit. A settlement with
    `record_span` off settles the money alone (a call whose span cannot be written) and marks
    its run's traces incomplete (`Run.traces_incomplete`)."""
    close_old_connections()
    by_key: dict[tuple[int, str], tuple[ApiKey, list[tuple[CallRecord, Charge]]]] = {}
    charges: list[Charge] = []
    spanless: set[str] = set()  # runs with a call whose span is given up on
    for item in settlements:
        charge = Charge(item.run_id, item.reserved_micros, item.call.cost_micros)
        charges.append(charge)
        if item.record_span:
            calls = by_key.setdefault((item.key.pk, item.run_id), (item.key, []))[1]
            calls.append((item.call, charge))
        else:
            spanless.add(item.run_id)
    with transaction.atomic():
        for (_, run_id), (key, calls) in by_key.items():
            spans = [call_span(run_id, call, charge) for call, charge in calls]
            spans_ingest(key=key, spans=spans, from_router=True)
        spend_settle(account=Run, charges=charges)
        if spanless:  # their traces are short of these calls: the run page says so
            Run.objects.filter(pk__in=sorted(spanless)).update(traces_incomplete=True)
