"""What the router needs to know of one API it serves (`Endpoint`): where its prompt is and
what it may be, the fields it forwards (issue 15's allow-list, one per API) and refuses, how
its worst case is bounded (the prompt estimated, the output limit it is sent with), and how its
answer, whole or streamed, gives the model, the text and the usage. The call's lifecycle
(`router.calls`) is the same for every endpoint."""

import dataclasses
import json

from billing.pricing import (
    Price,
    Usage,
    choices,
    output_tokens_limit,
    prompt_tokens_estimate,
    prompt_usage,
    worst_case_cost,
)
from router.pricing import REFUSED_FIELDS
from router.sse import EventReader


@dataclasses.dataclass
class Reading:
    """An answer as the span records it; its `usage` as the upstream reported it, None when
    it did not (the call then costs its reserved worst case)."""

    model: str = ""
    text: str = ""
    finish_reason: str = ""
    usage: Usage | None = None


class Endpoint:
    path = ""  # under /api/v1, and the upstream's path under its base
    operation = "chat"  # the span's gen_ai.operation.name
    prompt_field = "messages"  # where the prompt is
    prompt_types: tuple[type, ...] = (list,)
    prompt_fields: tuple[str, ...] = ()  # read as prompt beside it (tools, system, ...)
    forwarded: frozenset[str] = frozenset()  # the request fields forwarded, others dropped
    refused: frozenset[str] = REFUSED_FIELDS  # refused with a 400 naming the field
    limit_fields: tuple[str, ...] = ("max_tokens",)  # the output limits read, and sent
    produces_output = True  # embeddings do not
    streams = True  # embeddings do not
    # The tool types a covered call may carry (None: its tools are not checked); a name
    # ending in "_" stands for its versions (`bash_` for `bash_20250124`). Any other type
    # runs on the provider's side and bills work of its own (web search, code execution, an
    # advisor model's pass): refused like the routing fields, a new one too.
    tool_types: tuple[str, ...] | None = None

    def body_problem(self, body) -> str | None:
        """Why the body is not a request of this API (None when it is)."""
        if not isinstance(body, dict) or not isinstance(
            body.get(self.prompt_field), self.prompt_types
        ):
            kinds = " or ".join("a list" if t is list else "a text" for t in self.prompt_types)
            return f"The body must be a JSON object with {self.prompt_field} ({kinds})."
        return None

    def refused_field(self, body: dict) -> str | None:
        """The field a covered call may not carry (None when it carries none)."""
        found = next((name for name in body if name in self.refused), None)
        if found is None and self.tool_types is not None and not self.own_tools(body):
            return "tools"
        return found

    def own_tools(self, body: dict) -> bool:
        """Whether every tool is one the caller runs: with no type, or one of `tool_types`."""
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind is not None and not _one_of(kind, self.tool_types or ()):
                return False
        return True

    def unmeasured_part(self, body: dict) -> str | None:
        """The prompt field holding input the reservation cannot measure (None when all of it
        is measured): a file or a stored item the provider fetches itself (a PDF by URL or
        file id: hundreds of pages for the few tokens its reference is), for a covered call."""
        for name in (self.prompt_field, *self.prompt_fields):
            if _unmeasured(body.get(name)):
                return name
        return None

    def forwarded_fields(self, body: dict) -> dict:
        return {name: value for name, value in body.items() if name in self.forwarded}

    def upstream_headers(self, headers, *, covered: bool = False) -> dict[str, str]:
        """The caller's request headers the upstream gets too (none: the router's own), for a
        covered call or an own-key one."""
        return {}

    def authorized(self, target, headers: dict[str, str]) -> dict[str, str]:
        """The headers as the target's API takes its key (a bearer token, as the target
        sends it)."""
        return headers

    def model(self, body: dict) -> str:
        return body.get("model") if isinstance(body.get("model"), str) else ""

    def span_messages(self, body: dict) -> list:
        """The prompt as the span shows it: a list of messages."""
        prompt = body.get(self.prompt_field) if isinstance(body, dict) else None
        if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
            return prompt
        if prompt is None:
            return []
        content = prompt if isinstance(prompt, str) else json.dumps(prompt)
        return [{"role": "user", "content": content}]

    def prompt_tokens(self, body: dict) -> int:
        return prompt_tokens_estimate(
            body, messages_field=self.prompt_field, prompt_fields=self.prompt_fields
        )

    def output_limit(self, price: Price, body: dict) -> int:
        if not self.produces_output:
            return 0
        return output_tokens_limit(price, body, self.limit_fields)

    def prompt_usage(self, body: dict) -> Usage:
        """The prompt's estimate at the most it may cost (`billing.pricing.prompt_usage`: all
        of it written to the prompt cache when the body asks for caching)."""
        return prompt_usage(self.prompt_tokens(body), body)

    def worst_case(self, price: Price, body: dict) -> int:
        return worst_case_cost(
            price,
            body,
            prompt_tokens=self.prompt_tokens(body),
            output_tokens=self.output_limit(price, body) * choices(body),
        )

    def forwarded_body(self, body: dict, limit: int) -> dict:
        """The body sent upstream: its output limited to what was reserved for."""
        forwarded = dict(body)
        if self.produces_output:
            for name in self.limit_fields:
                forwarded[name] = limit
        return forwarded

    def usage_asked(self, forwarded: dict) -> dict:
        """The body with the stream's usage asked for, where the API must be asked."""
        return forwarded

    def read(self, document: dict) -> Reading:
        raise NotImplementedError

    def stream_reader(self) -> EventReader:
        raise NotImplementedError

    def stream_error(self, message: str) -> bytes:
        """The event that ends a stream the upstream broke."""
        error = {"message": message, "type": "upstream_error", "param": None, "code": None}
        return f"data: {json.dumps({'error': error})}\n\n".encode()


# Content parts whose input the provider fetches or expands itself (OpenAI's file and
# input_file parts, the Responses API's item_reference, Anthropic's container uploads), and
# the sources of a document it fetches (Anthropic's by URL or file id).
UNMEASURED_PARTS = frozenset({"file", "input_file", "item_reference", "container_upload"})
FETCHED_SOURCES = frozenset({"url", "file"})


def _unmeasured(value, depth: int = 0) -> bool:
    if depth > 64:  # deeper than any real prompt: not measured either
        return True
    if isinstance(value, list):
        return any(_unmeasured(item, depth + 1) for item in value)
    if not isinstance(value, dict):
        return False
    kind = value.get("type")
    if kind in UNMEASURED_PARTS:
        return True
    source = value.get("source")
    if kind == "document" and isinstance(source, dict) and source.get("type") in FETCHED_SOURCES:
        return True
    return any(_unmeasured(item, depth + 1) for item in value.values())


def _one_of(kind, types: tuple[str, ...]) -> bool:
    """Whether `kind` is one of `types`, a type ending in "_" standing for its versions."""
    if not isinstance(kind, str):
        return False
    return kind in types or any(t.endswith("_") and kind.startswith(t) for t in types)


def cap_budget(forwarded: dict, name: str, budget: str, limit: int) -> None:
    """A reasoning budget (OpenRouter's `reasoning.max_tokens`, Anthropic's
    `thinking.budget_tokens`) never past the output limit (reasoning is output)."""
    options = forwarded.get(name)
    if isinstance(options, dict) and isinstance(options.get(budget), int):
        forwarded[name] = {**options, budget: min(options[budget], limit)}
