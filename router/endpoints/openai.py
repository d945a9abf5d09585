"""OpenAI's APIs, as the router serves them: chat completions, (legacy) completions,
embeddings and responses. Each forwards only its own fields whose cost the reservation
bounds; fields that would pick another model or add billed work upstream are refused."""

import json

from billing.pricing import OUTPUT_LIMIT_FIELDS, PROMPT_FIELDS, Usage, chat_usage, whole_number
from router.endpoints.base import Endpoint, Reading, cap_budget
from router.pricing import FORWARDED_FIELDS, REFUSED_FIELDS
from router.sse import EventReader, StreamReader

# The Responses API's usage: `input_tokens` (with `input_tokens_details.cached_tokens`).
RESPONSES_USAGE = {"input_name": "input_tokens", "output_name": "output_tokens"}


def _with_usage(forwarded: dict) -> dict:
    """A stream asked for its usage in its last chunk (what the call is settled from)."""
    if forwarded.get("stream"):
        options = forwarded.get("stream_options")
        forwarded["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
    return forwarded


def _first_choice(document: dict) -> dict:
    choices = document.get("choices") or []
    return choices[0] if choices and isinstance(choices[0], dict) else {}


class Chat(Endpoint):
    path = "chat/completions"
    prompt_fields = PROMPT_FIELDS
    forwarded = FORWARDED_FIELDS
    limit_fields = OUTPUT_LIMIT_FIELDS

    def body_problem(self, body) -> str | None:
        if super().body_problem(body) is not None:
            return "The body must be a JSON object with messages."
        return None

    def forwarded_body(self, body: dict, limit: int) -> dict:
        forwarded = super().forwarded_body(body, limit)
        for name, budget in (("reasoning", "max_tokens"), ("thinking", "budget_tokens")):
            cap_budget(forwarded, name, budget, limit)
        return _with_usage(forwarded)

    def usage_asked(self, forwarded: dict) -> dict:
        return _with_usage(forwarded)

    def read(self, document: dict) -> Reading:
        choice = _first_choice(document)
        message = choice.get("message") or {}
        return Reading(
            model=str(document.get("model") or ""),
            text=str(message.get("content") or "") if isinstance(message, dict) else "",
            finish_reason=str(choice.get("finish_reason") or ""),
            usage=chat_usage(document.get("usage")),
        )

    def stream_reader(self) -> EventReader:
        return StreamReader()


class Completions(Chat):
    """The legacy text completions: a `prompt` (a text, texts or token ids) and choices of
    text. `best_of` is refused: it makes and bills that many completions upstream."""

    path = "completions"
    operation = "text_completion"
    prompt_field = "prompt"
    prompt_types = (str, list)
    forwarded = frozenset(
        {
            "model",
            "prompt",
            "suffix",
            "max_tokens",
            "temperature",
            "top_p",
            "n",
            "stream",
            "stream_options",
            "logprobs",
            "echo",
            "stop",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
            "seed",
            "user",
        }
    )
    prompt_fields = ("suffix",)
    refused = REFUSED_FIELDS | {"best_of"}
    limit_fields = ("max_tokens",)

    def body_problem(self, body) -> str | None:
        return Endpoint.body_problem(self, body)

    def unmeasured_part(self, body: dict) -> str | None:
        """A list of prompts makes one completion (n of them) per prompt upstream, which the
        reservation of one cannot bound: one prompt (a text, or one list of token ids) only."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and not all(whole_number(t) for t in prompt):
            if len(prompt) != 1 or not isinstance(prompt[0], (str, list)):
                return "prompt"
        return super().unmeasured_part(body)

    def read(self, document: dict) -> Reading:
        choice = _first_choice(document)
        return Reading(
            model=str(document.get("model") or ""),
            text=str(choice.get("text") or ""),
            finish_reason=str(choice.get("finish_reason") or ""),
            usage=chat_usage(document.get("usage")),
        )


class Embeddings(Endpoint):
    """Embeddings: input tokens only, never streamed."""

    path = "embeddings"
    operation = "embeddings"
    prompt_field = "input"
    prompt_types = (str, list)
    forwarded = frozenset({"model", "input", "encoding_format", "dimensions", "user"})
    produces_output = False
    streams = False

    def read(self, document: dict) -> Reading:
        return Reading(
            model=str(document.get("model") or ""),
            usage=chat_usage(document.get("usage"), output_name=None),
        )


class Responses(Endpoint):
    """The Responses API. Refused: a stored response or conversation as context (input the
    reservation cannot see), a stored prompt, background calls (billed after the answer),
    and every tool but a function or a custom one (the hosted tools bill per use)."""

    path = "responses"
    prompt_field = "input"
    prompt_types = (str, list)
    prompt_fields = ("instructions", "tools", "tool_choice", "text")
    forwarded = frozenset(
        {
            "model",
            "input",
            "instructions",
            "max_output_tokens",
            "temperature",
            "top_p",
            "stream",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "text",
            "reasoning",
            "truncation",
            "store",
            "metadata",
            "user",
        }
    )
    refused = REFUSED_FIELDS | {"previous_response_id", "conversation", "background", "prompt"}
    limit_fields = ("max_output_tokens",)
    # The caller's own tools only: the hosted ones (web and file search, code interpreter,
    # image generation, MCP, any new one) bill per use.
    tool_types = ("function", "custom")

    def span_messages(self, body: dict) -> list:
        messages = super().span_messages(body)
        if isinstance(body.get("instructions"), str):
            messages = [{"role": "system", "content": body["instructions"]}, *messages]
        return messages

    def read(self, document: dict) -> Reading:
        return Reading(
            model=str(document.get("model") or ""),
            text=_output_text(document),
            finish_reason=str(document.get("status") or ""),
            usage=chat_usage(document.get("usage"), **RESPONSES_USAGE),
        )

    def stream_reader(self) -> EventReader:
        return ResponsesStreamReader()

    def stream_error(self, message: str) -> bytes:
        error = {"type": "error", "code": "upstream_error", "message": message, "param": None}
        return f"event: error\ndata: {json.dumps(error)}\n\n".encode()


def _output_text(response: dict) -> str:
    parts = []
    for item in response.get("output") or []:
        for part in (item.get("content") or []) if isinstance(item, dict) else []:
            if isinstance(part, dict) and part.get("type") == "output_text":
                parts.append(str(part.get("text") or ""))
    return "".join(parts)


class ResponsesStreamReader(EventReader):
    """The Responses API's events: text in `response.output_text.delta`, the usage in the
    response that `response.completed` (or `.incomplete`, `.failed`) carries."""

    def __init__(self):
        super().__init__()
        self.usage: dict | None = None

    def event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            self.text_part(event.get("delta"))
        response = event.get("response")
        if isinstance(response, dict):
            if response.get("model") and not self.model:
                self.model = str(response["model"])
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                self.finish_reason = str(response.get("status") or "")
                if isinstance(response.get("usage"), dict):
                    self.usage = response["usage"]

    def reported_usage(self) -> Usage | None:
        return chat_usage(self.usage, **RESPONSES_USAGE)
