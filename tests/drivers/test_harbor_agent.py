"""The Belvedir Harbor agent under Harbor itself (the image scripts/harbor-image.sh builds): it
asks the model and writes /app/answer.md, which each task's verifier grades; and the driver's
run command (`python3 -m belvedir_harbor.run`) runs `harbor run` and writes results.json."""

import json
import shutil

import pytest

from harnesses import drivers
from harnesses.harbor_export import ExportOptions, export_files, write_directory
from runs.results import task_results
from tests.drivers.helpers import HARBOR, ScriptedLLM
from tests.helpers.harbor import FOUR_KINDS, harbor, harbor_image, run_job

from belvedir_harbor import AGENT_IMPORT_PATH  # isort: skip
from belvedir_harbor.run import agent_argument, harbor_command  # isort: skip

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# What the model answers; the scripted judge scores "good" 1.0 and "half" 0.6.
ANSWERS = {
    "What is the capital of France?": ["good"],
    "A customer asks for a refund after 40 days. What do you answer?": ["half"],
    "What is 2+2? Answer with the number only.": ["4"],
    "Tick the first item of notes/todo.txt.": ["Ticked."],
}


@pytest.fixture(scope="module")
def image():
    return harbor_image()


def export(tasks, folder):
    options = ExportOptions(base_image="belvedir-sandbox:latest")
    write_directory(export_files(tasks, options), folder)
    return folder


def with_instruction_prompts(llm):
    # The agent sends the task's instruction.md (the prompt and the answer-file line).
    for prompt, script in ANSWERS.items():
        llm.scripts[prompt] = script
    original = llm.completion

    def completion(body):
        messages = [
            {**m, "content": next((p for p in ANSWERS if m["content"].startswith(p)), m["content"])}
            for m in body["messages"]
        ]
        return original({**body, "messages": messages})

    llm.completion = completion
    return llm


def test_the_belvedir_agent_answers_each_task_for_its_verifier(image, tmp_path):
    dataset = export(FOUR_KINDS, tmp_path / "env")
    shutil.copytree(HARBOR, tmp_path / "harness-harbor")
    with with_instruction_prompts(ScriptedLLM()) as llm:
        env = {
            "PYTHONPATH": str(tmp_path / "harness-harbor"),
            "MODEL": "model-under-test",
            "MODEL_API_BASE": llm.base_url,
            "MODEL_API_KEY": "sk-model",
            "JUDGE_MODEL": "judge",
            "JUDGE_API_BASE": llm.base_url,
            "JUDGE_API_KEY": "sk-judge",
        }
        result = run_job(image, tmp_path, dataset, agent_argument("belvedir"), env)
        calls = llm.model_calls()
    # Judge and rubric graded by the judge, code by verify(): the agent's answers reached
    # /app/answer.md. It edits no files, so the state_diff task scores 0.
    assert result["trials"] == {"capital": 1.0, "refund": 0.6, "sum": 1.0, "todo": 0.0}
    # The export's STOPSIGNAL: each task container stops at once, not after compose's 10 s.
    assert max(result["stops"].values()) < 6, result["stops"]
    assert len(calls) == 4
    assert {c["headers"]["Authorization"] for c in calls} == {"Bearer sk-model"}
    assert all("/app/answer.md" in c["body"]["messages"][-1]["content"] for c in calls)


def test_the_run_command_runs_harbor_and_writes_the_score(image, tmp_path):
    code_only = [t for t in FOUR_KINDS if t["id"] in ("sum", "todo")]
    dataset = export(code_only, tmp_path / "env")
    driver = tmp_path / "harness-harbor"
    shutil.copytree(HARBOR, driver)
    for owner, relative in drivers.SHARED["harness-harbor"]:  # as the platform serves it
        (driver / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(drivers.DRIVERS_DIR / owner / relative, driver / relative)
    with with_instruction_prompts(ScriptedLLM()) as llm:
        done = harbor(
            image,
            tmp_path,
            "sh",
            "-c",
            f"cd {driver} && python3 -m belvedir_harbor.run",
            env={
                "HARBOR_DATASET": str(dataset),
                "HARBOR_AGENT": "belvedir",
                "MODEL": "model-under-test",
                "MODEL_API_BASE": llm.base_url,
            },
        )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    results = json.loads((driver / "results.json").read_text())
    assert results["score"] == 0.5
    assert task_results(results) == {"sum": 1.0, "todo": 0.0}
    assert results["tasks"]["sum"] == {"attempts": [1.0], "score": 1.0, "errored": 0}


def test_the_run_command_names_its_settings():
    env = {"HARBOR_DATASET": "terminal-bench@2.1", "HARBOR_AGENT": "claude-code"}
    env |= {"MODEL": "anthropic/claude-sonnet-5", "HARBOR_N_TASKS": "5"}
    command = harbor_command(env, None, jobs_dir="/tmp/jobs")
    assert command[:5] == ["harbor", "run", "-y", "--jobs-dir", "/tmp/jobs"]
    assert command[5:] == [
        *("-d", "terminal-bench@2.1", "-a", "claude-code", "-m", "anthropic/claude-sonnet-5"),
        *("-n", "1", "--env", "docker", "--n-tasks", "5"),
    ]
    assert agent_argument("belvedir") == "belvedir_harbor.agent:BelvedirAgent"


AGENT_NAMES = (
    "import json; from harbor.models.agent.name import AgentName; "
    "print(json.dumps([a.value for a in AgentName]))"
)


def test_every_agent_the_docs_and_cards_name_is_one_harbor_knows(image, tmp_path):
    """Harbor 0.26's own AgentName: the agents the docs name, the available scaffold cards'
    and those the driver treats specially; `belvedir` is this package's agent instead."""
    from belvedir_harbor import agents  # noqa: PLC0415

    from harnesses.catalog import PRESETS, SCAFFOLDS  # noqa: PLC0415

    done = harbor(image, tmp_path, "python", "-c", AGENT_NAMES)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set(json.loads(done.stdout.strip().splitlines()[-1]))
    documented = {"terminus-2", "claude-code", "openclaw", "opencode", "pi", "oracle", "nop"}
    assert documented <= names, documented - names
    cards = {p.env["HARBOR_AGENT"] for p in PRESETS if p.group == SCAFFOLDS and p.available}
    assert cards <= names and cards == {"openclaw", "opencode", "pi"}
    assert set(agents.DOWNLOADED_AGENTS) <= names and set(agents.LITELLM_AGENTS) <= names
    assert set(agents.OPENAI_COMPATIBLE_AGENTS) <= names
    assert "belvedir" not in names and agent_argument("belvedir") == AGENT_IMPORT_PATH
