"""Reading meaning out of decoded span attributes (OpenLLMetry / GenAI conventions).

Pure functions over the flat attribute dicts that :mod:`traces.otlp` produces.
LLM calls come in two attribute formats and both are read:

* current (OpenLLMetry >= 0.5x, GenAI semconv): ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` (JSON strings of ``{"role", "parts": [...]}``),
  ``gen_ai.system_instructions``, ``gen_ai.usage.input_tokens`` /
  ``output_tokens``, ``gen_ai.provider.name``, ``gen_ai.operation.name``;
* older / indexed (the SDK's raw-HTTP capture, its importers, and the
  OpenLLMetry instrumentations that were not migrated): ``gen_ai.prompt.N.role``
  / ``.content`` / ``.tool_calls.M.name|arguments``, ``gen_ai.completion.N.*``
  (``llm.prompts.N.*`` / ``llm.completions.N.*`` too), ``gen_ai.usage.prompt_tokens``
  / ``completion_tokens``, ``llm.usage.total_tokens``, ``gen_ai.system``,
  ``llm.request.type``.

Message content is flattened to text; tool calls become ``[tool_call]
name(arguments)`` lines, the form the SDK's importers already send.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from belvedir.validators import storable

SESSION_ID_KEYS = (
    "traceloop.association.properties.session_id",
    "session.id",
    "gen_ai.conversation.id",
)
MAX_SESSION_ID_CHARS = 255
MAX_TOKEN_COUNT = 2**31 - 1
SPAN_KINDS = frozenset({"workflow", "task", "agent", "tool", "llm"})

_INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.usage.prompt_tokens",
)
_OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.usage.completion_tokens",
)
_TOTAL_TOKEN_KEYS = ("gen_ai.usage.total_tokens", "llm.usage.total_tokens")
_PROMPT_PREFIXES = ("gen_ai.prompt.", "llm.prompts.")
_COMPLETION_PREFIXES = ("gen_ai.completion.", "llm.completions.")
_LONG_DIGITS = re.compile(r"[0-9]{19}")


@dataclass(slots=True)
class LlmCall:
    """One LLM call read from a span. Messages are ``{"role", "content"}`` dicts."""

    model: str = ""
    request_model: str = ""
    response_model: str = ""
    provider: str = ""
    operation: str = ""
    input_messages: list[dict[str, str]] = field(default_factory=list)
    output_messages: list[dict[str, str]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    finish_reasons: list[str] = field(default_factory=list)


def session_id_of(
    attributes: dict[str, Any], resource_attributes: dict[str, Any] | None = None
) -> str | None:
    """The span's session id: association property, else ``session.id``, else conversation id.

    Span attributes win over resource attributes for the same key. Ids longer
    than ``MAX_SESSION_ID_CHARS`` are cut to that length.
    """
    for key in SESSION_ID_KEYS:
        for source in (attributes, resource_attributes or {}):
            value = source.get(key)
            if isinstance(value, bool) or not isinstance(value, str | int):
                continue
            text = str(value).strip()
            if text:
                return text[:MAX_SESSION_ID_CHARS]
    return None


def span_kind_of(attributes: dict[str, Any]) -> str | None:
    """``traceloop.span.kind`` when it is workflow/task/agent/tool/llm, else None."""
    value = attributes.get("traceloop.span.kind")
    if isinstance(value, str) and value.lower() in SPAN_KINDS:
        return value.lower()
    return None


def entity_name_of(attributes: dict[str, Any], span_name: str) -> str:
    """``traceloop.entity.name``, else the span name without its ``.workflow``-style suffix."""
    value = attributes.get("traceloop.entity.name")
    if isinstance(value, str) and value.strip():
        return value.strip()
    kind = span_kind_of(attributes)
    if kind and span_name.endswith(f".{kind}"):
        return span_name[: -len(kind) - 1]
    return span_name


def parse_llm_call(attributes: dict[str, Any]) -> LlmCall | None:
    """The LLM call a span records, or None when it records none."""
    call = LlmCall(
        request_model=_text(attributes, "gen_ai.request.model", "llm.request.model"),
        response_model=_text(attributes, "gen_ai.response.model", "llm.response.model"),
        provider=_text(attributes, "gen_ai.provider.name", "gen_ai.system"),
        operation=_text(attributes, "gen_ai.operation.name", "llm.request.type"),
        input_tokens=_count(attributes, _INPUT_TOKEN_KEYS),
        output_tokens=_count(attributes, _OUTPUT_TOKEN_KEYS),
        total_tokens=_count(attributes, _TOTAL_TOKEN_KEYS),
    )
    call.model = call.response_model or call.request_model
    if call.total_tokens is None and None not in (call.input_tokens, call.output_tokens):
        total = call.input_tokens + call.output_tokens
        call.total_tokens = total if total <= MAX_TOKEN_COUNT else None

    try:
        _read_messages(call, attributes)
    except RecursionError:  # absurdly nested message JSON: keep the call, drop its messages
        call.input_messages, call.output_messages, call.finish_reasons = [], [], []
    if not call.finish_reasons:
        reasons = attributes.get("gen_ai.response.finish_reasons")
        if isinstance(reasons, list):
            call.finish_reasons = [r for r in reasons if isinstance(r, str)]

    # Message text came out of JSON strings: it may hold what PostgreSQL cannot store.
    call.input_messages = [_storable(m) for m in call.input_messages]
    call.output_messages = [_storable(m) for m in call.output_messages]
    is_llm = (
        call.model
        or call.operation
        or call.input_messages
        or call.output_messages
        or call.total_tokens is not None
        or span_kind_of(attributes) == "llm"
    )
    return call if is_llm else None


# -- Helpers ---------------------------------------------------------------------


def _storable(message: dict[str, str]) -> dict[str, str]:
    """NUL and lone surrogates (refused by PostgreSQL text and jsonb) become U+FFFD."""
    return {k: storable(v) if isinstance(v, str) else v for k, v in message.items()}


def _read_messages(call: LlmCall, attributes: dict[str, Any]) -> None:
    """Messages from the current format, else (per side) from the indexed one."""
    call.input_messages = _system_messages(attributes.get("gen_ai.system_instructions"))
    call.input_messages += _semconv_messages(attributes.get("gen_ai.input.messages"), "user")
    call.output_messages = _semconv_messages(
        attributes.get("gen_ai.output.messages"), "assistant", call.finish_reasons
    )
    if not call.input_messages or not call.output_messages:
        prompts, completions = _indexed_messages(attributes, call.finish_reasons)
        call.input_messages = call.input_messages or prompts
        call.output_messages = call.output_messages or completions


def _text(attributes: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _count(attributes: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """A token count: int, integral float (the importers send doubles) or digit string.

    Past ``MAX_TOKEN_COUNT`` it is no real count (and would not fit the span's integer
    columns, failing the whole batch): such a value is skipped like a missing one.
    """
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
            value = int(value)
        if isinstance(value, int) and 0 <= value <= MAX_TOKEN_COUNT:
            return value
    return None


def _load(value: Any) -> Any:
    """An attribute that holds JSON: usually a string; a list when sent as an array."""
    if isinstance(value, str):
        # orjson is faster; where it reads differently (NaN, lone surrogates, deep nesting,
        # integers past 64 bits, which it makes floats) the standard library decides.
        if _LONG_DIGITS.search(value) is None:
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def _semconv_messages(
    value: Any, default_role: str, finish_reasons: list[str] | None = None
) -> list[dict[str, str]]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: messages with parts."""
    messages = _load(value)
    if not isinstance(messages, list):
        return []
    out = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if "parts" in message:
            content = _parts_text(message.get("parts"))
        else:
            content = _content_text(message.get("content"))
        out.append(
            {"role": role if isinstance(role, str) and role else default_role, "content": content}
        )
        reason = message.get("finish_reason")
        if finish_reasons is not None and isinstance(reason, str) and reason:
            finish_reasons.append(reason)
    return out


def _system_messages(value: Any) -> list[dict[str, str]]:
    """``gen_ai.system_instructions``: a JSON list of parts (or plain text)."""
    if value is None or value == "":
        return []
    parts = _load(value)
    text = _parts_text(parts) if isinstance(parts, list) else str(value)
    return [{"role": "system", "content": text}] if text else []


def _parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return _content_text(parts)
    lines = []
    for part in parts:
        text = _part_text(part)
        if text:
            lines.append(text)
    return "\n".join(lines)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind == "tool_call":
        return _tool_call_line(part.get("name"), part.get("arguments"))
    if kind == "tool_call_response":
        return _content_text(part.get("response"))
    if kind == "reasoning":
        return ""
    for key in ("content", "text"):
        if key in part:
            return _content_text(part[key])
    return f"[{kind}]" if isinstance(kind, str) and kind else ""


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _parts_text(content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _tool_call_line(name: Any, arguments: Any) -> str:
    if isinstance(arguments, str):
        args = arguments
    elif arguments is None:
        args = ""
    else:
        args = json.dumps(arguments, ensure_ascii=False, default=str)
    return f"[tool_call] {name if isinstance(name, str) else ''}({args})"


def _indexed_messages(
    attributes: dict[str, Any], finish_reasons: list[str]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*`` into ordered messages."""
    prompts: dict[int, dict[str, Any]] = {}
    completions: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(("gen_ai.", "llm.")):
            continue
        for prefixes, target in ((_PROMPT_PREFIXES, prompts), (_COMPLETION_PREFIXES, completions)):
            prefix = next((p for p in prefixes if key.startswith(p)), None)
            if prefix is None:
                continue
            index, _, rest = key[len(prefix) :].partition(".")
            if index.isascii() and index.isdigit() and rest:
                target.setdefault(int(index), {})[rest] = value
            break
    inputs = [_indexed_message(prompts[i], "user") for i in sorted(prompts)]
    outputs = [_indexed_message(completions[i], "assistant") for i in sorted(completions)]
    for i in sorted(completions):
        reason = completions[i].get("finish_reason")
        if isinstance(reason, str) and reason:
            finish_reasons.append(reason)
    return inputs, outputs


def _indexed_message(fields: dict[str, Any], default_role: str) -> dict[str, str]:
    role = fields.get("role")
    lines = []
    content = _content_text(fields.get("content"))
    if content:
        lines.append(content)
    calls = {key.split(".")[1] for key in fields if key.startswith("tool_calls.")}
    for j in sorted(int(j) for j in calls if j.isascii() and j.isdigit()):
        lines.append(
            _tool_call_line(
                fields.get(f"tool_calls.{j}.name"), fields.get(f"tool_calls.{j}.arguments")
            )
        )
    return {
        "role": role if isinstance(role, str) and role else default_role,
        "content": "\n".join(lines),
    }
