"""Anthropic's Messages API (`POST /api/v1/messages`), for claude-code and Anthropic SDK
users: `ANTHROPIC_BASE_URL` is the platform's `/api` (the clients add `/v1/messages`) and the
run key comes as `x-api-key` or a bearer token. OpenRouter serves the same API at its `/api`.

A model named without its vendor (`claude-sonnet-4.5`, as Harbor's claude-code passes
`anthropic/claude-sonnet-4.5` on) is the catalog's `anthropic/…`. The usage comes in the
answer, or, streamed, in `message_start` (the input) and `message_delta` (the output so far,
cumulative); the input counts cache writes and reads at the input price."""

import json
from urllib.parse import urlsplit

from router.endpoints.base import Endpoint, Reading, cap_budget, usage_tokens
from router.pricing import REFUSED_FIELDS
from router.sse import EventReader

INPUT_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
VENDOR = "anthropic/"
# Request headers passed on to the upstream; a beta that bills differently (the 1M-token
# context's long-context prices) is left out.
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta")
REFUSED_BETAS = ("context-1m",)


class Messages(Endpoint):
    path = "messages"
    prompt_fields = ("system", "tools", "tool_choice")
    forwarded = frozenset(
        {
            "model",
            "messages",
            "system",
            "max_tokens",
            "stop_sequences",
            "stream",
            "temperature",
            "top_p",
            "top_k",
            "tools",
            "tool_choice",
            "thinking",
            "metadata",
        }
    )
    # MCP servers the provider would call, a code-execution container; server tools (web
    # search and fetch, code execution) bill per use.
    refused = REFUSED_FIELDS | {"mcp_servers", "container"}
    server_tools = ("web_search", "web_fetch", "code_execution")

    def upstream_headers(self, headers) -> dict[str, str]:
        return forwarded_headers(headers)

    def authorized(self, target, headers: dict[str, str]) -> dict[str, str]:
        """Anthropic's own API takes a key as x-api-key, not a bearer token (OpenRouter's
        Anthropic endpoint takes the bearer): an own key for a base at anthropic.com goes so."""
        host = urlsplit(target.base).hostname or ""
        if target.covered or not (host == "anthropic.com" or host.endswith(".anthropic.com")):
            return headers
        kept = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        return {**kept, "x-api-key": target.key}

    def model(self, body: dict) -> str:
        name = super().model(body)
        return name if not name or "/" in name else VENDOR + name

    def span_messages(self, body: dict) -> list:
        messages = super().span_messages(body)
        system = body.get("system") if isinstance(body, dict) else None
        if system:
            messages = [{"role": "system", "content": system}, *messages]
        return messages

    def forwarded_body(self, body: dict, limit: int) -> dict:
        forwarded = super().forwarded_body(body, limit)
        forwarded["model"] = self.model(body)
        cap_budget(forwarded, "thinking", "budget_tokens", limit)
        return forwarded

    def read(self, document: dict) -> Reading:
        return Reading(
            model=str(document.get("model") or ""),
            text=_text(document.get("content")),
            finish_reason=str(document.get("stop_reason") or ""),
            tokens=usage_tokens(document.get("usage"), INPUT_USAGE, "output_tokens"),
        )

    def stream_reader(self) -> EventReader:
        return MessagesStreamReader()

    def stream_error(self, message: str) -> bytes:
        error = {"type": "error", "error": {"type": "api_error", "message": message}}
        return f"event: error\ndata: {json.dumps(error)}\n\n".encode()


def forwarded_headers(headers) -> dict[str, str]:
    """The Anthropic request headers the upstream gets (`FORWARDED_HEADERS`)."""
    out = {}
    for name in FORWARDED_HEADERS:
        value = headers.get(name)
        if value and name == "anthropic-beta":
            kept = [b.strip() for b in value.split(",") if b.strip()]
            value = ",".join(b for b in kept if not b.startswith(REFUSED_BETAS))
        if value:
            out[name] = value
    return out


def _text(content) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


class MessagesStreamReader(EventReader):
    """Anthropic's events: `message_start` (the model, the input usage), `content_block_delta`
    (text), `message_delta` (the stop reason, the output usage), `message_stop`."""

    def __init__(self):
        super().__init__()
        self.input_usage: dict | None = None
        self.output_usage: dict | None = None

    def event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self.model = self.model or str(message.get("model") or "")
            if isinstance(message.get("usage"), dict):
                self.input_usage = message["usage"]
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            self.text_part(delta.get("text") if delta.get("type") == "text_delta" else None)
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.finish_reason = str(delta["stop_reason"])
            if isinstance(event.get("usage"), dict):
                self.output_usage = event["usage"]
        elif kind == "message_stop":
            self.done = True

    def tokens(self) -> tuple[int, int] | None:
        """None until `message_delta` said the output (a stream cut before it is estimated);
        a later delta's input counts win over `message_start`'s."""
        if self.output_usage is None:
            return None
        usage = {**(self.input_usage or {}), **self.output_usage}
        return usage_tokens(usage, INPUT_USAGE, "output_tokens")
