"""The model settings each agent scaffold gets from the documented variables (MODEL,
MODEL_API_BASE, MODEL_API_KEY, OPENROUTER_API_KEY; the router when covered): the driver's
`harbor run` arguments for openclaw, opencode and pi, and what Harbor 0.26 itself makes of them
in the Harbor image, each agent's own configuration as it writes it into the task container:

- OpenCode: `~/.config/opencode/opencode.json`'s provider (harbor/agents/installed/opencode.py,
  `build_opencode_provider_config`, `_build_register_config_command`) and `--model=`;
- Pi: `models.json`'s custom provider (harbor/agents/installed/pi.py,
  `_build_custom_models_json`; Pi refuses a custom endpoint without an API format and a key
  variable, in `check_model_credentials`);
- OpenClaw: `openclaw.json`'s `models.providers` (harbor/agents/installed/openclaw.py,
  `_merge_model_connection`, `_build_full_openclaw_config`);
- all three: the environment Harbor gives the agent in the task container
  (`model_connection.env`, harbor/agents/agent_auth_resolution.py `resolve_model_connection`).

The flags reach Harbor's AgentConfig as harbor/cli/jobs.py puts them there (`-a` name, `-m`
model_name, `--base-url` base_url, `--api-key-name` model_api_key_name, `--api-format`
model_api_format), and the agent is made by Harbor's AgentFactory after its own preflight.
"""

import json

import pytest

from tests.drivers.helpers import HARBOR  # noqa: F401  (puts the drivers on sys.path)
from tests.helpers.harbor import harbor, harbor_image

from belvedir_harbor import agents, run  # isort: skip

ROUTER = "http://172.30.0.1:18700/api/v1/router/v1"
RUN_KEY = "bv_run_secret"
OWN_KEY = "sk-or-own-secret"
SCAFFOLDS = ("openclaw", "opencode", "pi")


def command(env: dict) -> list[str]:
    return run.harbor_command(
        {"HARBOR_DATASET": "belvedir-sample", **env}, run.SAMPLE_DIR, "/tmp/jobs"
    )


def after(arguments: list[str], flag: str) -> str | None:
    return arguments[arguments.index(flag) + 1] if flag in arguments else None


@pytest.mark.parametrize("agent", SCAFFOLDS)
def test_a_scaffold_gets_the_model_base_and_key_variable_as_harbors_flags(agent):
    own = command(
        {"HARBOR_AGENT": agent, "MODEL": "anthropic/claude-sonnet-5"} | {"MODEL_API_KEY": OWN_KEY}
    )
    # OpenRouter by default, as for every harness; its vendor/model id kept whole behind
    # LiteLLM's OpenAI-compatible route.
    assert after(own, "-m") == "openai/anthropic/claude-sonnet-5"
    assert after(own, "--base-url") == "https://openrouter.ai/api/v1"
    assert after(own, "--api-key-name") == "MODEL_API_KEY"
    assert after(own, "--api-format") == "openai_chat_completions"
    assert OWN_KEY not in own  # the variable's name, never the key
    # Covered: the platform gives the run's key and the router as MODEL_API_*.
    covered = command(
        {"HARBOR_AGENT": agent, "MODEL": "fakelab/fake-model"}
        | {"MODEL_API_BASE": ROUTER, "MODEL_API_KEY": RUN_KEY}
    )
    assert after(covered, "-m") == "openai/fakelab/fake-model"
    assert after(covered, "--base-url") == ROUTER
    # OPENROUTER_API_KEY stands in for a blank MODEL_API_KEY.
    fallback = command({"HARBOR_AGENT": agent, "MODEL": "m", "OPENROUTER_API_KEY": "sk-or"})
    assert after(fallback, "--api-key-name") == "OPENROUTER_API_KEY"
    assert after(command({"HARBOR_AGENT": agent, "MODEL": "openai/gpt-4.1"}), "-m") == (
        "openai/gpt-4.1"
    )


def test_other_agents_keep_their_model_arguments():
    assert command({"HARBOR_AGENT": "belvedir", "MODEL": "m"})[7:11] == [
        "-a", "belvedir_harbor.agent:BelvedirAgent", "-m", "m",
    ]  # fmt: skip
    claude = command({"HARBOR_AGENT": "claude-code", "MODEL": "anthropic/claude-sonnet-5"})
    assert after(claude, "-m") == "anthropic/claude-sonnet-5" and "--base-url" not in claude
    terminus = command({"HARBOR_AGENT": "terminus-2", "MODEL": "m", "MODEL_API_BASE": ROUTER})
    assert after(terminus, "--ak") == f"api_base={ROUTER}" and after(terminus, "-m") == "openai/m"
    assert "--base-url" not in terminus and "--api-format" not in terminus
    assert set(agents.OPENAI_COMPATIBLE_AGENTS) == set(SCAFFOLDS)


# In the Harbor image: the driver's arguments into Harbor's AgentConfig as its CLI does, the
# agent made by Harbor's factory, and what it would write and pass in the task container.
PROBE = """
import json, sys, tempfile
from pathlib import Path
from harbor.agents.factory import AgentFactory
from harbor.models.trial.config import AgentConfig

argv = json.loads(sys.argv[1])
flags = {"-a": "name", "-m": "model_name", "--base-url": "base_url",
         "--api-key-name": "model_api_key_name", "--api-format": "model_api_format"}
fields = {flags[a]: argv[i + 1] for i, a in enumerate(argv) if a in flags}
config = AgentConfig(**fields)
AgentFactory.run_preflight(config)
agent = AgentFactory.create_agent_from_config(config, logs_dir=Path(tempfile.mkdtemp()))
connection = agent.model_connection
seen = {"env": dict(connection.env)}
if config.name == "opencode":
    written = agent._build_register_config_command()
    seen["config"] = json.loads(written.split("echo ", 1)[1].rsplit(" > ", 1)[0].strip("'"))
    seen["model"] = agent._execution_model_name()
elif config.name == "pi":
    provider, model_id = agent._parse_model_name(agent.model_name)
    seen["config"] = agent._build_custom_models_json(connection, model_id)
elif config.name == "openclaw":
    provider, model_id = agent._parse_model_name(agent.model_name)
    seen["config"] = agent._build_full_openclaw_config()
    seen["model"] = f"{provider}/{model_id}"
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def image():
    return harbor_image()


def harbor_sees(image, tmp_path, env: dict) -> dict:
    """What Harbor 0.26 makes of the driver's run command for `env`, in Harbor's process
    environment as the driver starts it (run.harbor_env)."""
    process_env = {
        k: v
        for k, v in run.harbor_env(env).items()
        if k in env or k.startswith(("OPENAI_", "LITELLM_"))
    }
    process_env.pop("HOME", None)
    done = harbor(image, tmp_path, "python", "-c", PROBE, json.dumps(command(env)), env=process_env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


COVERED = {"MODEL": "fakelab/fake-model", "MODEL_API_BASE": ROUTER, "MODEL_API_KEY": RUN_KEY}
OWN = {"MODEL": "anthropic/claude-sonnet-5", "MODEL_API_KEY": OWN_KEY}


@pytest.mark.docker
@pytest.mark.parametrize("agent", SCAFFOLDS)
@pytest.mark.parametrize(
    ("given", "base", "model", "key"),
    [
        (COVERED, ROUTER, "fakelab/fake-model", RUN_KEY),
        (OWN, "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-5", OWN_KEY),
    ],
    ids=["covered", "own-openrouter-key"],
)
def test_harbor_gives_each_scaffold_the_model_base_and_key_in_its_own_config(
    image, tmp_path, agent, given, base, model, key
):
    seen = harbor_sees(image, tmp_path, {"HARBOR_AGENT": agent, **given})
    # The key reaches the task container as OPENAI_API_KEY, and no configuration holds it.
    assert seen["env"] == {"OPENAI_API_KEY": key}, seen
    assert key not in json.dumps(seen["config"])
    if agent == "opencode":
        assert seen["config"]["provider"] == {
            "openai": {
                "models": {model: {}},
                "options": {"baseURL": base, "apiKey": "{env:OPENAI_API_KEY}"},
                "npm": "@ai-sdk/openai-compatible",
            }
        }
        assert seen["model"] == f"openai/{model}"
    elif agent == "pi":
        assert seen["config"] == {
            "providers": {
                "harbor-endpoint": {
                    "baseUrl": base,
                    "apiKey": "$OPENAI_API_KEY",
                    "api": "openai-completions",
                    "models": [{"id": model}],
                }
            }
        }
    else:
        assert seen["config"]["models"]["providers"] == {
            "openai": {
                "api": "openai-completions",
                "baseUrl": base,
                "apiKey": "${OPENAI_API_KEY}",
                "models": [{"id": model, "name": model}],
            }
        }
        assert seen["model"] == f"openai/{model}"


def test_agents_that_call_no_model_get_no_model_argument():
    """`-m` makes Harbor load LiteLLM to read the name (~8 s under gVisor, 2.7 s without it to
    the first task sandbox, bench/harbor_managed.py); oracle and nop call no model."""
    for agent in agents.MODELLESS_AGENTS:
        got = command({"HARBOR_AGENT": agent, "MODEL": "m", "MODEL_API_BASE": ROUTER})
        assert got[7:9] == ["-a", agent] and "-m" not in got and "--base-url" not in got
