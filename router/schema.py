"""The OpenAPI description of the router's plain (async, non-DRF) endpoints, added to the
schema by the `router_endpoints` postprocessing hook. Bodies are OpenAI's: only what the
router itself reads or adds is described."""

from belvedir.schema import ERROR_DESCRIPTIONS
from belvedir.text import size_text
from router.http import MAX_BODY_BYTES

ERROR = {
    "type": "object",
    "description": "OpenAI's error shape, so OpenAI clients raise their typed errors.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string", "example": "insufficient_quota"},
                "param": {"type": "string", "nullable": True},
                "code": {"type": "string", "nullable": True, "example": "spend_cap_reached"},
            },
        }
    },
}

CHAT_REQUEST = {
    "type": "object",
    "description": "An OpenAI chat completion request, forwarded to the operator's upstream.",
    "required": ["model", "messages"],
    "additionalProperties": True,
    "properties": {
        "model": {"type": "string", "description": "A covered model id (GET /api/v1/models)."},
        "messages": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        "stream": {"type": "boolean", "description": "Server-sent events, passed through."},
        "max_tokens": {"type": "integer", "description": "Bounds the reserved worst case."},
        "max_completion_tokens": {"type": "integer"},
    },
}

OPENAI_OBJECT = {"type": "object", "additionalProperties": True}


def _error(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}},
    }


# The other endpoints (router/endpoints): their summary and the request's prompt field.
OTHER_ENDPOINTS = {
    "completions": ("OpenAI (legacy) completions", "prompt"),
    "embeddings": ("OpenAI embeddings: input tokens only, never streamed", "input"),
    "responses": ("OpenAI Responses", "input"),
    "messages": (
        "Anthropic Messages (the run key as x-api-key or a bearer token; Anthropic's SSE "
        "events when streamed)",
        "messages",
    ),
}


def _endpoint_operation(path: str) -> dict:
    """An endpoint other than chat completions: as chat's, with its own request."""
    summary, prompt = OTHER_ENDPOINTS[path]
    operation = _chat_operation()
    request = {
        "type": "object",
        "description": f"A request of the {summary.split(':')[0]} API, forwarded upstream.",
        "required": ["model", prompt],
        "additionalProperties": True,
        "properties": {"model": CHAT_REQUEST["properties"]["model"], prompt: {}},
    }
    operation.update(
        operationId=f"router_{path}",
        summary=f"Call a covered model: {summary}; metered against the run's cap.",
    )
    operation["requestBody"]["content"]["application/json"]["schema"] = request
    return operation


def _chat_operation() -> dict:
    return {
        "operationId": "router_chat_completions",
        "summary": "Call a covered model (OpenAI-compatible), metered against the run's cap.",
        "description": (
            "For runs whose model usage the platform covers: the sandbox gets this base URL as "
            "`MODEL_API_BASE` and the run key as `MODEL_API_KEY`. The call's worst-case cost is "
            "reserved before it is forwarded and settled from its usage after; every call is "
            "recorded as an LLM span in the run's session."
        ),
        "tags": ["router"],
        "security": [{"RunKey": []}],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": CHAT_REQUEST}},
        },
        "responses": {
            "200": {
                "description": "The upstream's completion, or its event stream.",
                "content": {
                    "application/json": {"schema": OPENAI_OBJECT},
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            },
            "400": _error(
                "The body is not a chat completion request, or asks for more than 8 choices "
                "(`n`, param n)."
            ),
            "401": _error("No key, or an unknown or revoked one."),
            "402": _error("The run's covered spend cap is reached (code spend_cap_reached)."),
            "403": _error(
                "Not a run key (run_key_required), the run is not running (run_not_running) or "
                "not covered (run_not_covered), or the model's lab is a Chinese lab and the "
                "project does not allow Chinese models (model_not_allowed)."
            ),
            "404": _error("The model is not one the platform covers."),
            "405": _error("Not a POST (method_not_allowed)."),
            "413": _error(
                f"The body is over {size_text(MAX_BODY_BYTES, iec=False)} (body_too_large)."
            ),
            "500": _error("Something went wrong on the platform's side (server_error)."),
            "501": _error(
                "A streamed call to a router served by WSGI (streaming_needs_asgi): streams "
                "need the ASGI server."
            ),
            "502": _error(
                "The upstream could not be reached, its stream broke, or it refused the "
                "platform's own account (upstream_refused: its 401, 402 or 403)."
            ),
            "503": _error("The platform has no upstream configured."),
            "504": _error("The upstream did not answer in time."),
        },
    }


def _models_operation() -> dict:
    return {
        "operationId": "router_models",
        "summary": "List the models the platform covers (OpenAI-compatible).",
        "tags": ["router"],
        "security": [{"RunKey": []}],
        "responses": {
            "200": {
                "description": (
                    "The covered models this run may call, with their prices per million "
                    "tokens: none when the run's usage is not covered, no Chinese lab's model "
                    "when its project does not allow them."
                ),
                "content": {"application/json": {"schema": OPENAI_OBJECT}},
            },
            "401": _error("No key, or an unknown or revoked one."),
            "403": _error("Not a run key."),
            "405": _error("Neither a GET nor an upload's POST (method_not_allowed)."),
            "500": _error("Something went wrong on the platform's side (server_error)."),
        },
    }


def _api_error(status: int) -> dict:
    """One of the REST API's documented errors (belvedir.schema), as a plain dict."""
    name = "InvalidInput" if status == 400 else "Error"
    return {
        "description": ERROR_DESCRIPTIONS[status],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
    }


def _fine_tuned_upload_operation() -> dict:
    """POST on the router's path: a fine-tuned model's upload (models_registry.api), which the
    schema generator cannot see behind the router's view."""
    return {
        "operationId": "models_upload",
        "summary": "Upload a fine-tuned model: a LoRA adapter zip on a Hugging Face base model.",
        "description": "multipart/form-data, streamed to storage. The zip must hold "
        "adapter_config.json and adapter_model.safetensors (or .bin), within "
        "BELVEDIR_ADAPTER_MAX_BYTES; a refusal names what is wrong under `adapter`.",
        "tags": ["models"],
        "security": [{"ApiKey": []}, {"cookieAuth": []}],
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "The model's label."},
                            "base_model": {
                                "type": "string",
                                "description": "The base model's Hugging Face id.",
                            },
                            "gated": {"type": "boolean", "default": False},
                            "adapter": {"type": "string", "format": "binary"},
                        },
                        "required": ["name", "base_model", "adapter"],
                    }
                }
            },
        },
        "responses": {
            "201": {
                "description": "The model, stored.",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/FineTunedModel"}}
                },
            },
            **{str(status): _api_error(status) for status in (400, 401, 403, 404)},
        },
    }


def router_endpoints(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: add the router's endpoints and error shape (and
    the fine-tuned model upload that shares the router's /api/v1/models)."""
    result.setdefault("components", {}).setdefault("schemas", {})["OpenAIError"] = ERROR
    result["paths"]["/api/v1/chat/completions"] = {"post": _chat_operation()}
    for path in OTHER_ENDPOINTS:
        result["paths"][f"/api/v1/{path}"] = {"post": _endpoint_operation(path)}
    result["paths"]["/api/v1/models"] = {
        "get": _models_operation(),
        "post": _fine_tuned_upload_operation(),
    }
    return result
