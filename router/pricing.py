"""What a call may cost: the catalog's prices, the worst case reserved before a call, the cost
settled after it. All money is integer micro-dollars; prices are per million tokens."""

import json
from typing import NamedTuple

from models_registry.selectors import covered_model

# A prompt is estimated at one token per this many ASCII characters (real tokenizers average
# ~4) and one token per other character (Chinese, Japanese, Korean text: about one each).
CHARS_PER_TOKEN = 3
# What each message adds beyond its text (role, separators), in tokens.
TOKENS_PER_MESSAGE = 8
# What an image part (`image_url`) may cost in input tokens, whatever its URL's or data's length
# (a high-detail image is ~1,100 tokens at OpenAI).
TOKENS_PER_IMAGE = 1_500
# The most choices (`n`) a call may ask for.
MAX_CHOICES = 8

# The request fields the router forwards: OpenAI's chat-completions fields whose cost the
# reservation bounds (the prompt fields below are counted as input; the output is capped by
# the limit sent upstream, reasoning budgets under it; `n` multiplies it). Any other field is
# dropped before the call is reserved or forwarded.
FORWARDED_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "functions",
        "function_call",
        "response_format",
        "seed",
        "n",
        "user",
        "frequency_penalty",
        "presence_penalty",
        "logprobs",
        "top_logprobs",
        "logit_bias",
        "reasoning_effort",
        "reasoning",
        "thinking",
    }
)
# Fields that would change which model serves the call or what it is billed (OpenRouter's
# fallback models, routing, provider choice, plugins such as web search and file parsing,
# prompt transforms; OpenAI's audio output, web search and service tiers): refused with a 400
# naming the field rather than dropped, so the caller knows it did not get what it asked for.
REFUSED_FIELDS = frozenset(
    {
        "models",
        "route",
        "provider",
        "plugins",
        "transforms",
        "modalities",
        "audio",
        "web_search_options",
        "service_tier",
        "prediction",
    }
)
# The fields whose text the model reads as its prompt (counted in the reserved input).
PROMPT_FIELDS = ("tools", "tool_choice", "functions", "function_call", "response_format")


class Price(NamedTuple):
    input_micros_per_mtok: int
    output_micros_per_mtok: int
    max_output_tokens: int


def price_for(model: str) -> Price | None:
    """The covered model's prices (the catalog's enabled entry), or None when not covered."""
    entry = covered_model(model)
    if entry is None:
        return None
    return Price(entry.input_price_micros, entry.output_price_micros, entry.max_output_tokens)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def cost_micros(price: Price, *, input_tokens: int, output_tokens: int) -> int:
    """The cost of a call's tokens, rounded up to a whole micro-dollar."""
    total = (
        input_tokens * price.input_micros_per_mtok + output_tokens * price.output_micros_per_mtok
    )
    return _ceil_div(max(total, 0), 1_000_000)


def text_tokens(text: str) -> int:
    """A conservative count of a text's tokens."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return _ceil_div(ascii_chars, CHARS_PER_TOKEN) + (len(text) - ascii_chars)


def _without_images(messages: list) -> tuple[list, int]:
    """The messages with their image parts left out, and how many there were."""
    images, kept = 0, []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(_is_image(part) for part in content):
            parts = [part for part in content if not _is_image(part)]
            images += len(content) - len(parts)
            message = {**message, "content": parts}
        kept.append(message)
    return kept, images


def _is_image(part) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def prompt_tokens_estimate(body: dict) -> int:
    """A conservative count of the prompt's tokens (it is what the caller sent, tools included):
    its text (`text_tokens`), each message's overhead and each image's allowance."""
    messages = body.get("messages") or []
    images = 0
    if isinstance(messages, list):
        messages, images = _without_images(messages)
    prompt = [messages, *(body.get(name) for name in PROMPT_FIELDS)]
    text = json.dumps(prompt, ensure_ascii=False)
    count = len(messages) if isinstance(messages, list) else 1
    return text_tokens(text) + TOKENS_PER_MESSAGE * count + TOKENS_PER_IMAGE * images


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def refused_field(body: dict) -> str | None:
    """The first field of the call the router refuses (`REFUSED_FIELDS`), or None."""
    return next((name for name in body if name in REFUSED_FIELDS), None)


def forwarded_fields(body: dict) -> dict:
    """The call with only the fields the router forwards (`FORWARDED_FIELDS`)."""
    return {name: value for name, value in body.items() if name in FORWARDED_FIELDS}


def choices_problem(body: dict) -> str | None:
    """Why the call's `n` cannot be served (None when it can)."""
    n = body.get("n", 1)
    if n is None or (_whole(n) and 1 <= n <= MAX_CHOICES):
        return None
    return f"n must be a whole number from 1 to {MAX_CHOICES}."


def choices(body: dict) -> int:
    """How many choices the call asks for (`n`, checked by `choices_problem`)."""
    n = body.get("n")
    return n if _whole(n) and 1 <= n <= MAX_CHOICES else 1


def output_tokens_limit(price: Price, body: dict) -> int:
    """The most output one choice may produce (reasoning included): the call's own limit (the
    smaller of `max_completion_tokens` and `max_tokens`), never past the model's cap. Both are
    sent upstream set to it."""
    limit = price.max_output_tokens
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if _whole(value) and value > 0:
            limit = min(limit, value)
    return limit


def worst_case_micros(price: Price, body: dict) -> int:
    return cost_micros(
        price,
        input_tokens=prompt_tokens_estimate(body),
        output_tokens=output_tokens_limit(price, body) * choices(body),
    )
