"""A router call as an LLM span in its run's session (`router.services.calls_settle` ingests
them): the model, the messages, the tokens (the prompt cache's too), the cost as charged, and
what an upstream reported past the reservation."""

import json
import secrets
from typing import TYPE_CHECKING

from billing.spend import Charge
from traces import otlp

if TYPE_CHECKING:
    from router.services import CallRecord

PROVIDER = "belvedir.router"


def call_span(run_id: str, call: "CallRecord", charge: Charge) -> otlp.SpanIn:
    """The call as an LLM span in the run's session (session id = the run's id): its tokens as
    the upstream reported them, its cost as charged; when the upstream reported more than was
    reserved, the excess too (and the reported cost)."""
    attributes = {
        "session.id": run_id,
        "traceloop.span.kind": "llm",
        "gen_ai.operation.name": call.operation,
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": call.model,
        "gen_ai.input.messages": json.dumps(
            call.messages if isinstance(call.messages, list) else []
        ),
        "belvedir.router.cost_micros": charge.charged_micros,
        "belvedir.router.cost_usd": charge.charged_micros / 1e6,
        "belvedir.router.streamed": call.streamed,
        "http.response.status_code": call.http_status,
    }
    if call.billed_to_provider:  # an own-key call: the run page's "billed to your provider"
        attributes["belvedir.router.billed_to"] = "provider"
        if call.estimated_cost_micros is not None:
            attributes["belvedir.router.estimated_cost_micros"] = call.estimated_cost_micros
    if charge.excess_micros:  # "upstream reported more than reserved"
        attributes["belvedir.router.reserved_micros"] = charge.reserved_micros
        attributes["belvedir.router.reported_cost_micros"] = charge.cost_micros
        attributes["belvedir.router.excess_micros"] = charge.excess_micros
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
    read, *written = call.cache_tokens
    if read or any(written):  # of the input (OpenTelemetry's GenAI names)
        attributes["gen_ai.usage.cache_read.input_tokens"] = read
        attributes["gen_ai.usage.cache_creation.input_tokens"] = sum(written)
        attributes["belvedir.router.cache_creation_1h_input_tokens"] = written[1]
    if call.error:
        attributes["error.type"] = str(call.http_status)
    # In the client's trace, under its span of the call, when it sent one (the pair that
    # counts once: traces.services.ingest, _CLIENT_TWINS); else a trace of its own.
    trace_id, parent_span_id = call.trace_parent or (secrets.token_hex(16), "")
    return otlp.SpanIn(
        trace_id=trace_id,
        span_id=secrets.token_hex(8),
        parent_span_id=parent_span_id,
        name=f"{call.operation} {call.model}"[:500],
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
