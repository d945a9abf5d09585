"""What the router takes of a call and at what price: the fields it forwards or refuses, the
number of choices it serves, and a covered model's catalog prices (the worst case and the
cost themselves are billing's: `billing.pricing`)."""

from billing.pricing import MAX_CHOICES, Price, catalog_price, whole_number
from models_registry.inference import is_anthropic
from models_registry.selectors import covered_model

# The request fields the router forwards for a chat completion (each endpoint's own are in
# router.endpoints): OpenAI's chat-completions fields whose cost the
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


def price_for(model: str) -> Price | None:
    """The covered model's prices (the catalog's enabled entry; Anthropic's models with
    Anthropic's prompt-cache rates), or None when not covered."""
    entry = covered_model(model)
    if entry is None:
        return None
    return catalog_price(entry, anthropic=is_anthropic(entry.model_id))


def choices_problem(body: dict) -> str | None:
    """Why the call's `n` cannot be served (None when it can)."""
    n = body.get("n", 1)
    if n is None or (whole_number(n) and 1 <= n <= MAX_CHOICES):
        return None
    return f"n must be a whole number from 1 to {MAX_CHOICES}."
