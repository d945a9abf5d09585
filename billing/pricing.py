"""What a model call may cost, in integer micro-dollars from prices per million tokens: the
worst case reserved before a call (its prompt counted conservatively, as if written whole to
the provider's prompt cache when it asks for caching, its output at the limit it is sent with,
every choice) and the cost of the tokens an upstream reports after it (`Usage`: the prompt
cache's writes and reads at the cache's prices where the model's price has them). The router
and covered environment generation reserve with it (`billing.spend`)."""

import json
from fractions import Fraction
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


class CacheRates(NamedTuple):
    """What a provider bills for its prompt cache, as multiples of the model's input price."""

    write_5m: Fraction  # a write kept five minutes (Anthropic's default)
    write_1h: Fraction  # a write kept an hour (`cache_control.ttl: "1h"`)
    read: Fraction


# Anthropic's prompt-cache prices (its pricing page; OpenRouter bills Anthropic's models the
# same): a 5-minute write 1.25x the input price, a 1-hour write 2x, a read 0.1x. The catalog
# holds each model's input price; these are the multiples of it (docs/models.md, "Prompt
# caching"). Other labs' models have no cache prices in the catalog: their cached input is
# charged at the input price.
ANTHROPIC_CACHE = CacheRates(write_5m=Fraction(5, 4), write_1h=Fraction(2), read=Fraction(1, 10))


class Price(NamedTuple):
    input_micros_per_mtok: int
    output_micros_per_mtok: int
    max_output_tokens: int
    cache: CacheRates | None = None  # None: cache writes and reads at the input price


def catalog_price(entry, *, anthropic: bool) -> Price:
    """A covered model's price from its catalog entry (`models_registry.CoveredModel`);
    `anthropic`: one of Anthropic's models, whose prompt cache bills at `ANTHROPIC_CACHE`."""
    return Price(
        entry.input_price_micros,
        entry.output_price_micros,
        entry.max_output_tokens,
        ANTHROPIC_CACHE if anthropic else None,
    )


class Usage(NamedTuple):
    """A call's tokens as its upstream reported them. `input_tokens` is all of its input, the
    prompt cache's reads and writes included (what the span shows as its input); of it,
    `cache_write_tokens` were written for a time the upstream did not say (priced at the
    dearest the request asked for: `with_ttl`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_write_tokens: int = 0

    def with_ttl(self, ttl: str | None) -> "Usage":
        """The writes whose time was not said counted as written for `ttl` (None or "5m":
        five minutes, else an hour)."""
        if not self.cache_write_tokens:
            return self
        field = "cache_write_5m_tokens" if ttl in (None, "5m") else "cache_write_1h_tokens"
        return self._replace(
            **{field: getattr(self, field) + self.cache_write_tokens}, cache_write_tokens=0
        )

    @property
    def cache_writes(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens + self.cache_write_tokens


def _ceil_div(a, b: int) -> int:
    return -(-a // b)


def cost_micros(price: Price, *, input_tokens: int, output_tokens: int, **cache: int) -> int:
    """The cost of a call's tokens, rounded up to a whole micro-dollar; `cache`: the input's
    share read from and written to the prompt cache (`Usage`'s fields)."""
    return usage_cost_micros(price, Usage(input_tokens, output_tokens, **cache))


def usage_cost_micros(price: Price, usage: Usage) -> int:
    """The cost of a call's usage, rounded up to a whole micro-dollar: its prompt cache's
    reads and writes at the price's cache rates (writes whose time was not said, at the
    5-minute rate), or at the input price when the price has none."""
    usage, rates = usage.with_ttl(None), price.cache
    input_cost: int | Fraction = max(usage.input_tokens, 0)
    if rates is not None:
        cached = usage.cache_read_tokens + usage.cache_writes
        input_cost = (
            max(usage.input_tokens - cached, 0)
            + usage.cache_read_tokens * rates.read
            + usage.cache_write_5m_tokens * rates.write_5m
            + usage.cache_write_1h_tokens * rates.write_1h
        )
    total = (
        input_cost * price.input_micros_per_mtok
        + usage.output_tokens * price.output_micros_per_mtok
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


def cache_ttl_asked(body) -> str | None:
    """The dearest prompt-cache time the body's `cache_control` markers ask for (anywhere in
    it: the system prompt, tools, messages, the top level): "1h", "5m" (Anthropic's default,
    a marker without `ttl`), or None when none asks for caching. A time it does not know
    counts as "1h"."""
    found, pending = None, [body]
    while pending:
        value = pending.pop()
        if isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, dict):
            marker = value.get("cache_control")
            if marker is not None:
                ttl = marker.get("ttl", "5m") if isinstance(marker, dict) else None
                if ttl != "5m":
                    return "1h"
                found = "5m"
            pending.extend(value.values())
    return found


def prompt_usage(prompt_tokens: int, body: dict) -> Usage:
    """A prompt of `prompt_tokens` as the most it may cost: all of it written to the prompt
    cache, for the dearest time the body asks for, when it asks for caching (a cache write
    costs more than input: `ANTHROPIC_CACHE`)."""
    ttl = cache_ttl_asked(body)
    writes = prompt_tokens if ttl is not None else 0
    return Usage(prompt_tokens, cache_write_tokens=writes).with_ttl(ttl)


def worst_case_cost(price: Price, body: dict, *, prompt_tokens: int, output_tokens: int) -> int:
    """The most a call may cost: its prompt as `prompt_usage` has it (a price without cache
    rates charges a write as input: the body is not searched for markers), its output at most
    `output_tokens`."""
    prompt = prompt_usage(prompt_tokens, body) if price.cache else Usage(prompt_tokens)
    return usage_cost_micros(price, prompt._replace(output_tokens=output_tokens))


def worst_case_micros(price: Price, body: dict) -> int:
    return worst_case_cost(
        price,
        body,
        prompt_tokens=prompt_tokens_estimate(body),
        output_tokens=output_tokens_limit(price, body) * choices(body),
    )


def chat_usage(
    usage, *, input_name: str = "prompt_tokens", output_name: str | None = "completion_tokens"
) -> Usage | None:
    """An OpenAI-shaped usage (chat and legacy completions, embeddings, responses) as `Usage`,
    or None when there is none: the input (`prompt_tokens`, or the Responses API's
    `input_tokens`) with its details' `cached_tokens` (read from the cache) and OpenRouter's
    `cache_write_tokens` (written, for a time it does not say), both inside the input."""
    if not isinstance(usage, dict):
        return None
    details = usage.get(input_name + "_details")
    details = details if isinstance(details, dict) else {}
    return Usage(
        input_tokens=reported_tokens(usage.get(input_name)),
        output_tokens=reported_tokens(usage.get(output_name)) if output_name else 0,
        cache_read_tokens=reported_tokens(details.get("cached_tokens")),
        cache_write_tokens=reported_tokens(details.get("cache_write_tokens")),
    )
