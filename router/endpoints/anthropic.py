"""Anthropic's Messages API (`POST /api/v1/messages`), for claude-code and Anthropic SDK
users: `ANTHROPIC_BASE_URL` is the platform's `/api` (the clients add `/v1/messages`) and the
run key comes as `x-api-key` or a bearer token. OpenRouter serves the same API at its `/api`.

A model named without its vendor (`claude-sonnet-4.5`, as Harbor's claude-code passes
`anthropic/claude-sonnet-4.5` on) is the catalog's `anthropic/…`. The usage comes in the
answer, or, streamed, in `message_start` (the input) and `message_delta` (the output so far,
cumulative, and in newer answers the input again); the input is `input_tokens` plus the prompt
cache's writes and reads, which an Anthropic model's price bills at Anthropic's cache rates
(`billing.pricing.ANTHROPIC_CACHE`)."""

import json
from urllib.parse import urlsplit

from billing.pricing import Usage, reported_tokens
from router.endpoints.base import Endpoint, Reading, cap_budget
from router.pricing import REFUSED_FIELDS
from router.sse import EventReader

VENDOR = "anthropic/"
# Request headers passed on to the upstream; a beta that bills differently (the 1M-token
# context's long-context prices) is left out, and on a covered call one for work the
# reservation does not bound (compaction's extra pass, the advisor tool's).
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta")
REFUSED_BETAS = ("context-1m",)
COVERED_REFUSED_BETAS = (*REFUSED_BETAS, "compact-", "advisor-tool-")
# The context edits a covered call may ask for (Claude Code's): clearing old tool uses or
# thinking only removes input. Compaction (`compact_…`) runs a sampling pass of its own.
CLEARING_EDITS = ("clear_tool_uses_", "clear_thinking_")


class Messages(Endpoint):
    path = "messages"
    prompt_fields = ("system", "tools", "tool_choice", "output_config")  # its JSON schema
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
            # Claude Code's: context editing, the output's effort or format, automatic prompt
            # caching (a write priced at its rate; the reservation counts its marker too).
            "context_management",
            "output_config",
            "cache_control",
        }
    )
    # MCP servers the provider would call, a code-execution container; server tools (web
    # search and fetch, code execution, the advisor, any new one) bill per use: a covered
    # call's tools are its own (no type, or "custom") or ones the client executes.
    refused = REFUSED_FIELDS | {"mcp_servers", "container"}
    tool_types = ("custom", "bash_", "text_editor_", "computer_", "memory_")

    def refused_field(self, body: dict) -> str | None:
        found = super().refused_field(body)
        if found is None and "context_management" in body:
            return None if clearing_only(body["context_management"]) else "context_management"
        return found

    def upstream_headers(self, headers, *, covered: bool = False) -> dict[str, str]:
        return forwarded_headers(headers, COVERED_REFUSED_BETAS if covered else REFUSED_BETAS)

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
            usage=anthropic_usage(document.get("usage")),
        )

    def stream_reader(self) -> EventReader:
        return MessagesStreamReader()

    def stream_error(self, message: str) -> bytes:
        error = {"type": "error", "error": {"type": "api_error", "message": message}}
        return f"event: error\ndata: {json.dumps(error)}\n\n".encode()


def clearing_only(context_management) -> bool:
    """Whether a `context_management` asks only for `CLEARING_EDITS`."""
    edits = context_management.get("edits") if isinstance(context_management, dict) else None
    return isinstance(edits, list) and all(
        isinstance(edit, dict)
        and isinstance(edit.get("type"), str)
        and edit["type"].startswith(CLEARING_EDITS)
        for edit in edits
    )


def forwarded_headers(headers, refused_betas: tuple[str, ...] = REFUSED_BETAS) -> dict[str, str]:
    """The Anthropic request headers the upstream gets (`FORWARDED_HEADERS`), less the
    `refused_betas`."""
    out = {}
    for name in FORWARDED_HEADERS:
        value = headers.get(name)
        if value and name == "anthropic-beta":
            kept = [b.strip() for b in value.split(",") if b.strip()]
            value = ",".join(b for b in kept if not b.startswith(refused_betas))
        if value:
            out[name] = value
    return out


def anthropic_usage(usage) -> Usage | None:
    """Anthropic's usage as `Usage`: the input is `input_tokens` (what follows the last cache
    breakpoint) plus `cache_creation_input_tokens` (written to the cache; newer answers split
    them by time in `cache_creation`: `ephemeral_5m_input_tokens`, `ephemeral_1h_input_tokens`)
    plus `cache_read_input_tokens`. Writes the split does not account for have no time said.

    An answer that sampled more than once (compaction's summary before the message) lists
    each pass in `iterations`; its top-level counts are the message's own, so every other
    pass is added to them (settlement still charges at most the reservation)."""
    if not isinstance(usage, dict):
        return None
    passes = usage.get("iterations")
    passes = passes if isinstance(passes, list) else []
    total = _usage(usage)
    for extra in passes:
        if isinstance(extra, dict) and extra.get("type") != "message":
            total = Usage(*(a + b for a, b in zip(total, _usage(extra), strict=True)))
    return total


def _usage(usage: dict) -> Usage:
    """One pass's counts."""
    split = usage.get("cache_creation")
    split = split if isinstance(split, dict) else {}
    five_minutes = reported_tokens(split.get("ephemeral_5m_input_tokens"))
    hour = reported_tokens(split.get("ephemeral_1h_input_tokens"))
    written = max(reported_tokens(usage.get("cache_creation_input_tokens")), five_minutes + hour)
    read = reported_tokens(usage.get("cache_read_input_tokens"))
    return Usage(
        input_tokens=reported_tokens(usage.get("input_tokens")) + written + read,
        output_tokens=reported_tokens(usage.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_5m_tokens=five_minutes,
        cache_write_1h_tokens=hour,
        cache_write_tokens=written - five_minutes - hour,
    )


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
        self.start_usage: dict | None = None  # message_start's
        self.delta_usage: dict | None = None  # message_delta's, cumulative

    def event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self.model = self.model or str(message.get("model") or "")
            if isinstance(message.get("usage"), dict):
                self.start_usage = message["usage"]
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            self.text_part(delta.get("text") if delta.get("type") == "text_delta" else None)
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.finish_reason = str(delta["stop_reason"])
            if isinstance(event.get("usage"), dict):
                # Its counts are cumulative; the input ones may be null (not said again).
                said = {k: v for k, v in event["usage"].items() if v is not None}
                self.delta_usage = {**(self.delta_usage or {}), **said}
        elif kind == "message_stop":
            self.done = True

    def reported_usage(self) -> Usage | None:
        """None until `message_delta` said the output (a stream cut before it is settled from
        `input_usage`); a delta's input counts win over `message_start`'s."""
        if self.delta_usage is None:
            return None
        return anthropic_usage({**(self.start_usage or {}), **self.delta_usage})

    def input_usage(self) -> Usage | None:
        """`message_start`'s input usage (its cache writes and reads), output not counted."""
        usage = anthropic_usage(self.start_usage)
        return None if usage is None else usage._replace(output_tokens=0)
