"""What a call may cost: the catalog's prices, the worst case reserved before a call, the cost
settled after it. All money is integer micro-dollars; prices are per million tokens."""

import json
from typing import NamedTuple

from models_registry.selectors import covered_model

# A prompt is estimated at one token per this many characters (real tokenizers average ~4).
CHARS_PER_TOKEN = 3
# What each message adds beyond its text (role, separators), in tokens.
TOKENS_PER_MESSAGE = 8


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


def prompt_tokens_estimate(body: dict) -> int:
    """A conservative count of the prompt's tokens (it is what the caller sent, tools included)."""
    messages = body.get("messages") or []
    text = json.dumps([messages, body.get("tools"), body.get("functions")], ensure_ascii=False)
    count = len(messages) if isinstance(messages, list) else 1
    return _ceil_div(len(text), CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * count


def output_tokens_limit(price: Price, body: dict) -> int:
    """The most output the call may produce: its own limit, never past the model's cap."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return min(value, price.max_output_tokens)
    return price.max_output_tokens


def worst_case_micros(price: Price, body: dict) -> int:
    return cost_micros(
        price,
        input_tokens=prompt_tokens_estimate(body),
        output_tokens=output_tokens_limit(price, body),
    )
