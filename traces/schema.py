"""The OpenAPI description of the two plain (non-DRF) ingest endpoints, added to the schema.

`POST /api/v1/traces` and `POST /api/v1/outcomes` are plain Django views (see traces.ingest_views),
so drf-spectacular cannot see them; `ingest_endpoints` is a postprocessing hook that adds them,
with the OTLP/HTTP bodies (JSON and protobuf) and their answers as components.
"""

from django.conf import settings

from traces.ingest_views import OUTCOMES_TOO_LARGE
from traces.models import Outcome


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _string(description: str) -> dict:
    return {"type": "string", "description": description}


def _array(items: dict) -> dict:
    return {"type": "array", "items": items}


OTLP_COMPONENTS = {
    "OtlpAnyValue": {
        "type": "object",
        "description": "One attribute value: exactly one of the fields is set.",
        "properties": {
            "stringValue": {"type": "string"},
            "boolValue": {"type": "boolean"},
            "intValue": {"type": "string", "description": "A 64-bit integer, as a string."},
            "doubleValue": {"type": "number"},
            "bytesValue": {"type": "string", "description": "Base64."},
            "arrayValue": {
                "type": "object",
                "properties": {"values": _array(_ref("OtlpAnyValue"))},
            },
            "kvlistValue": {
                "type": "object",
                "properties": {"values": _array(_ref("OtlpKeyValue"))},
            },
        },
    },
    "OtlpKeyValue": {
        "type": "object",
        "required": ["key", "value"],
        "properties": {"key": {"type": "string"}, "value": _ref("OtlpAnyValue")},
    },
    "OtlpSpan": {
        "type": "object",
        "required": ["traceId", "spanId", "name"],
        "properties": {
            "traceId": _string("32 hex digits."),
            "spanId": _string("16 hex digits."),
            "parentSpanId": _string("16 hex digits; empty for a root span."),
            "name": {"type": "string"},
            "kind": {"type": "integer", "description": "OTLP SpanKind (1 internal … 5 consumer)."},
            "startTimeUnixNano": _string("Nanoseconds since the epoch, as a string."),
            "endTimeUnixNano": _string("Nanoseconds since the epoch, as a string."),
            "attributes": {
                **_array(_ref("OtlpKeyValue")),
                "description": "gen_ai.* (current and older formats), traceloop.*, session ids.",
            },
            "events": _array(
                {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "timeUnixNano": {"type": "string"},
                        "attributes": _array(_ref("OtlpKeyValue")),
                    },
                }
            ),
            "status": {
                "type": "object",
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            },
        },
    },
    "OtlpExportTraceServiceRequest": {
        "type": "object",
        "description": "OTLP/HTTP ExportTraceServiceRequest in its JSON encoding.",
        "properties": {
            "resourceSpans": _array(
                {
                    "type": "object",
                    "properties": {
                        "resource": {
                            "type": "object",
                            "properties": {"attributes": _array(_ref("OtlpKeyValue"))},
                        },
                        "scopeSpans": _array(
                            {
                                "type": "object",
                                "properties": {
                                    "scope": {
                                        "type": "object",
                                        "properties": {
                                            "name": {"type": "string"},
                                            "version": {"type": "string"},
                                        },
                                    },
                                    "spans": _array(_ref("OtlpSpan")),
                                },
                            }
                        ),
                    },
                }
            )
        },
    },
    "OtlpExportTraceServiceResponse": {
        "type": "object",
        "description": "Empty when every span was stored; `partialSuccess` counts the rejected.",
        "properties": {
            "partialSuccess": {
                "type": "object",
                "properties": {
                    "rejectedSpans": _string("How many spans were rejected, as a string."),
                    "errorMessage": _string("Why, for the first few."),
                },
            }
        },
    },
    "OtlpStatus": {
        "type": "object",
        "description": "google.rpc.Status, as OTLP/HTTP answers errors.",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "integer", "description": "The gRPC status code."},
            "message": {"type": "string"},
        },
    },
    "OutcomeRequest": {
        "type": "object",
        "required": ["session_id", "outcome"],
        "properties": {
            "session_id": _string("The session id the spans carried."),
            "outcome": {"type": "string", "enum": list(Outcome.values)},
        },
    },
    "Outcome": {
        "type": "object",
        "required": ["session_id", "outcome"],
        "properties": {
            "session_id": {"type": "string"},
            "outcome": {"type": "string", "enum": list(Outcome.values)},
        },
    },
}


def _otlp_content(json_schema: dict) -> dict:
    return {
        "application/json": {"schema": json_schema},
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
    }


def _otlp_error(description: str, *, retry: bool = False) -> dict:
    response = {"description": description, "content": _otlp_content(_ref("OtlpStatus"))}
    if retry:
        response["headers"] = {
            "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}
        }
    return response


def _json_error(description: str, name: str = "Error") -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _traces_operation() -> dict:
    limit = settings.BELVEDIR_INGEST_MAX_BYTES
    return {
        "operationId": "traces_ingest",
        "summary": "Send spans (OTLP/HTTP, JSON or protobuf, gzip allowed); answered in kind.",
        "description": (
            "What the belvedir SDK and plain OpenTelemetry/Traceloop exporters send. Spans are "
            "stored once per (project, trace id, span id), so resending is safe. A few bad "
            "spans still answer 200, with `partialSuccess`. The answer is in the request's "
            "content type."
        ),
        "tags": ["traces"],
        "security": [{"ApiKey": []}, {"RunKey": []}],
        "parameters": [
            {
                "name": "Content-Encoding",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "enum": ["gzip", "identity"]},
            }
        ],
        "requestBody": {
            "required": True,
            "content": _otlp_content(_ref("OtlpExportTraceServiceRequest")),
        },
        "responses": {
            "200": {
                "description": "Stored (some spans may be rejected: see partialSuccess).",
                "content": _otlp_content(_ref("OtlpExportTraceServiceResponse")),
            },
            "400": _otlp_error("The body cannot be decoded."),
            "401": _otlp_error("No key, or an unknown or revoked one."),
            "413": _otlp_error(f"The body is over {limit} bytes, before or after gunzip."),
            "415": _otlp_error("Neither application/json nor application/x-protobuf."),
            "503": _otlp_error("Ingest is busy.", retry=True),
        },
    }


def _outcomes_operation() -> dict:
    return {
        "operationId": "outcomes_record",
        "summary": "Report whether a traced session succeeded or failed.",
        "tags": ["traces"],
        "security": [{"ApiKey": []}, {"RunKey": []}],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("OutcomeRequest")}},
        },
        "responses": {
            "200": {
                "description": "Recorded.",
                "content": {"application/json": {"schema": _ref("Outcome")}},
            },
            "400": _json_error(
                "Bad input: the field named in the body says what to fix.", "InvalidInput"
            ),
            "401": _json_error("No key, or an unknown or revoked one."),
            "404": _json_error("No session with this id in the key's project.", "InvalidInput"),
            "413": _json_error(OUTCOMES_TOO_LARGE),
        },
    }


def ingest_endpoints(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: add the ingest endpoints and their components."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(OTLP_COMPONENTS)
    result["paths"]["/api/v1/traces"] = {"post": _traces_operation()}
    result["paths"]["/api/v1/outcomes"] = {"post": _outcomes_operation()}
    return result
