"""Provider inference: the OpenAI-compatible base a blank MODEL_API_BASE stands for."""

OPENROUTER = "https://openrouter.ai/api/v1"
OPENAI = "https://api.openai.com/v1"
ANTHROPIC = "https://api.anthropic.com/v1/"
GOOGLE = "https://generativelanguage.googleapis.com/v1beta/openai/"

# Bare model names and the provider that serves them; anything else goes to OpenRouter.
_BARE_PREFIXES = [
    (("gpt-", "chatgpt-", "o1", "o3", "o4"), OPENAI),
    (("claude-",), ANTHROPIC),
    (("gemini-",), GOOGLE),
]


def infer_api_base(model: str) -> str:
    """`vendor/model` → OpenRouter; bare OpenAI, Anthropic and Gemini ids → their own
    OpenAI-compatible endpoints; anything else (or no model) → OpenRouter."""
    name = model.strip().lower()
    if "/" not in name:
        for prefixes, base in _BARE_PREFIXES:
            if name.startswith(prefixes):
                return base
    return OPENROUTER


def resolve_api_base(*, model: str, api_base: str, gpu: bool) -> str:
    """The base a run uses: the one given; else blank on a GPU harness (it serves the model
    itself), else the inferred provider."""
    if api_base.strip():
        return api_base.strip()
    if gpu:
        return ""
    return infer_api_base(model)


def is_anthropic(model: str) -> bool:
    """A model of Anthropic's: a bare `claude-…` id, or OpenRouter's `anthropic/…`."""
    return model.strip().lower().startswith(("claude-", "anthropic/"))


def anthropic_base(api_base: str) -> str:
    """An OpenAI-compatible `…/v1` base as Anthropic's clients take it (they add `/v1/messages`)."""
    return api_base.strip().rstrip("/").removesuffix("/v1")
