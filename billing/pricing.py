"""What a model call may cost, in integer micro-dollars from prices per million tokens: the
worst case reserved before a call (its prompt counted conservatively, its output at the limit
it is sent with, every choice) and the cost of the tokens an upstream reports after it. The
router and covered environment generation reserve with it (`billing.spend`)."""

import json
from typing import NamedTuple

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

# The fields whose text the model reads as its prompt (counted in the reserved input).
PROMPT_FIELDS = ("tools", "tool_choice", "functions", "function_call", "response_format")

# The content parts that are images (OpenAI chat's, Anthropic's, OpenAI Responses'): each
# counted at TOKENS_PER_IMAGE, not by its data's length.
IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})

# The output limits a chat completion may name (both are sent upstream set to the one kept).
OUTPUT_LIMIT_FIELDS = ("max_completion_tokens", "max_tokens")


class Price(NamedTuple):
    input_micros_per_mtok: int
    output_micros_per_mtok: int
    max_output_tokens: int


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
    return isinstance(part, dict) and part.get("type") in IMAGE_PARTS


def prompt_tokens_estimate(
    body: dict, *, messages_field: str = "messages", prompt_fields=PROMPT_FIELDS
) -> int:
    """A conservative count of the prompt's tokens (it is what the caller sent, tools included):
    its text (`text_tokens`), each message's overhead and each image's allowance. The prompt is
    `messages_field` (a chat's messages; another API's `input` or `prompt`, a list or a text)
    and the `prompt_fields` beside it."""
    messages = body.get(messages_field) or []
    images = 0
    if isinstance(messages, list):
        messages, images = _without_images(messages)
    prompt = [messages, *(body.get(name) for name in prompt_fields)]
    text = json.dumps(prompt, ensure_ascii=False)
    count = len(messages) if isinstance(messages, list) else 1
    return text_tokens(text) + TOKENS_PER_MESSAGE * count + TOKENS_PER_IMAGE * images


def whole_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def reported_tokens(value) -> int:
    """A token count as an upstream's usage reports it: a whole positive number, else 0."""
    return value if whole_number(value) and value > 0 else 0


def choices(body: dict) -> int:
    """How many choices the call asks for (`n`, checked by `choices_problem`)."""
    n = body.get("n")
    return n if whole_number(n) and 1 <= n <= MAX_CHOICES else 1


def output_tokens_limit(price: Price, body: dict, fields=OUTPUT_LIMIT_FIELDS) -> int:
    """The most output one choice may produce (reasoning included): the call's own limit (the
    smallest of its `fields`: a chat's `max_completion_tokens` and `max_tokens`), never past
    the model's cap. Sent upstream set to it."""
    limit = price.max_output_tokens
    for name in fields:
        value = body.get(name)
        if whole_number(value) and value > 0:
            limit = min(limit, value)
    return limit


def worst_case_micros(price: Price, body: dict) -> int:
    return cost_micros(
        price,
        input_tokens=prompt_tokens_estimate(body),
        output_tokens=output_tokens_limit(price, body) * choices(body),
    )
