"""What each Harbor agent needs, from the documented variables only (MODEL, MODEL_API_BASE,
MODEL_API_KEY, OPENROUTER_API_KEY): the form of the model settings Harbor 0.26 hands it, and
what it downloads when the run starts (so an offline install fails fast, naming it).

Read from Harbor 0.26's own source (`harbor/agents/installed/*.py`,
`harbor/agents/agent_auth_resolution.py`), and checked against it in the Harbor image by
tests/drivers/test_harbor_agent_models.py.
"""

from __future__ import annotations

import urllib.error
import urllib.request

# Harbor agents that call the model from Harbor's own process through LiteLLM.
LITELLM_AGENTS = ("terminus-2",)
# Harbor agents that install themselves in each task container when the run starts, and what
# they fetch from the internet there (Harbor 0.26's harbor/agents/installed/*.py: each
# `install()`, and node_install.py's nvm snippet, nvm v0.40.2 then Node 22 by default).
DOWNLOADED_AGENTS = {
    "claude-code": "the npm package @anthropic-ai/claude-code (or Anthropic's installer from "
    "downloads.claude.ai)",
    "openclaw": "curl from the image's package manager, nvm from raw.githubusercontent.com, "
    "Node 24 and the npm package openclaw",
    "opencode": "curl, bash and Node from the image's package manager, nvm from "
    "raw.githubusercontent.com with Node 22, and the npm package opencode-ai",
    "pi": "curl from the image's package manager, nvm from raw.githubusercontent.com, Node 22 "
    "and the npm package @earendil-works/pi-coding-agent",
}
NPM_REGISTRY_URL = "https://registry.npmjs.org/"
# Harbor agents that call Anthropic's Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL),
# which OpenRouter serves too (at https://openrouter.ai/api), and the platform's router (at
# its /api).
ANTHROPIC_AGENTS = ("claude-code",)
# Harbor agents whose model connection Harbor 0.26 sets from its own flags --base-url,
# --api-key-name and --api-format (harbor/cli/jobs.py, AgentConfig's base_url,
# model_api_key_name and model_api_format), written into each agent's own configuration in the
# task container: OpenCode's ~/.config/opencode/opencode.json provider (opencode.py,
# build_opencode_provider_config), Pi's models.json custom provider (pi.py,
# _build_custom_models_json; Pi refuses a custom endpoint without an API format and a key
# variable) and OpenClaw's openclaw.json models.providers (openclaw.py,
# _merge_model_connection; its providers are anthropic, google, nvidia, openai, openrouter).
# The model is named `openai/<MODEL>`, Harbor's advice for an OpenAI-compatible endpoint
# (harbor/agents/factory.py): LiteLLM reads the provider `openai` and the model id MODEL,
# which each agent sends to MODEL_API_BASE as it is (OpenRouter's vendor/model ids kept).
OPENAI_COMPATIBLE_AGENTS = ("openclaw", "opencode", "pi")
# Harbor's agents that call no model: `-m` would only make Harbor load LiteLLM to read the
# name, ~8 s of a run under gVisor (bench/harbor_managed.py), for nothing.
MODELLESS_AGENTS = ("oracle", "nop")
OPENAI_CHAT_COMPLETIONS = "openai_chat_completions"  # Harbor's ModelApiFormat value
DEFAULT_MODEL_API_BASE = "https://openrouter.ai/api/v1"


class Refused(ValueError):
    """A setting the driver cannot run with; the message names it."""


def openai_model(model: str) -> str:
    """MODEL as LiteLLM's OpenAI-compatible route names it: `openai/<MODEL>`."""
    return model if not model or model.startswith("openai/") else f"openai/{model}"


def model_arguments(env, agent: str, model: str) -> list[str]:
    """`harbor run`'s model arguments for `agent` (a Harbor agent name, or the Belvedir
    agent's import path) from the documented variables.

    - terminus-2 (LiteLLM in Harbor's process): MODEL_API_BASE as LiteLLM's api_base
      (`--ak api_base=...`), the model as `openai/<MODEL>`; its key is OPENAI_API_KEY in
      Harbor's environment (harbor_env).
    - openclaw, opencode, pi: `-m openai/<MODEL>`, `--base-url` MODEL_API_BASE (OpenRouter by
      default, as for every harness), `--api-key-name` the variable holding the key
      (MODEL_API_KEY, else OPENROUTER_API_KEY; Harbor copies its value into the task
      container as OPENAI_API_KEY and the agent's config names that variable, never the key)
      and `--api-format openai_chat_completions` (MODEL_API_BASE is OpenAI-compatible).
    - oracle, nop: none (they call no model; results.json still names MODEL).
    - any other: `-m MODEL` as it is.
    """
    if agent in MODELLESS_AGENTS:
        return []
    api_base = env.get("MODEL_API_BASE", "").strip()
    if agent in LITELLM_AGENTS:
        if not api_base:
            return ["-m", model] if model else []
        return ["--ak", f"api_base={api_base}", *(["-m", openai_model(model)] if model else [])]
    if agent in OPENAI_COMPATIBLE_AGENTS and model:
        arguments = ["-m", openai_model(model), "--base-url", api_base or DEFAULT_MODEL_API_BASE]
        key_name = next(
            (name for name in ("MODEL_API_KEY", "OPENROUTER_API_KEY") if env.get(name, "").strip()),
            None,
        )
        if key_name:
            arguments += ["--api-key-name", key_name]
        return [*arguments, "--api-format", OPENAI_CHAT_COMPLETIONS]
    return ["-m", model] if model else []


def anthropic_settings(env) -> dict[str, str]:
    """ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL from the documented variables: MODEL_API_KEY
    (else OPENROUTER_API_KEY) and MODEL_API_BASE (OpenRouter by default) without its /v1, which
    Anthropic's clients add. A run through the router (covered, or your key proxied) has the
    run key and the router, which serves Anthropic's Messages API at /api/v1/messages."""
    key = (env.get("MODEL_API_KEY") or env.get("OPENROUTER_API_KEY") or "").strip()
    base = (env.get("MODEL_API_BASE") or DEFAULT_MODEL_API_BASE).strip().rstrip("/")
    return {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": base.removesuffix("/v1")}


def reachable(url: str, timeout: float = 5.0) -> bool:
    """Whether `url` answers from here (an offline install: no)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except (urllib.error.URLError, OSError, ValueError):
        return False


def downloads_agent(env, *, modal: bool) -> bool:
    """Whether HARBOR_AGENT installs itself from the internet in each task container, and
    where those are (not your own Modal account's containers, which have the internet)."""
    return env.get("HARBOR_AGENT", "").strip() in DOWNLOADED_AGENTS and not modal


def agent_downloads_check(env, *, modal: bool, installed: frozenset[str] = frozenset()) -> None:
    """Refused, naming what it needed, when HARBOR_AGENT installs itself from the internet in
    each task container and this install cannot reach the npm registry (offline): the run
    stops before Harbor starts rather than failing in every trial. Your own Modal account's
    containers (`modal`) have the internet; nothing is checked there. An agent every task's
    image already holds (`installed`: the platform's export says so where its base image
    has it) installs nothing: Harbor 0.26 skips the install of an agent whose version
    command answers (BaseInstalledAgent.is_requested_version_installed)."""
    agent = env.get("HARBOR_AGENT", "").strip()
    if not downloads_agent(env, modal=modal) or agent in installed or reachable(NPM_REGISTRY_URL):
        return
    raise Refused(
        f"HARBOR_AGENT {agent} installs itself in each task container when the run starts: it "
        f"needs {DOWNLOADED_AGENTS[agent]} from the internet, and {NPM_REGISTRY_URL} cannot be "
        "reached from here (an offline install). Offline, use belvedir, terminus-2 or oracle, or "
        "task images that hold the agent (the operator's BELVEDIR_EXPORT_BASE_IMAGE and "
        "BELVEDIR_EXPORT_BASE_AGENTS); or run on your own Modal account (MODAL_TOKEN_ID and "
        "MODAL_TOKEN_SECRET)."
    )
