"""End to end on an offline install: Claude Code itself (the npm package
@anthropic-ai/claude-code, pinned, in the task base image scripts/claude-code-image.sh builds),
driven by Harbor 0.26's `claude-code` agent in a managed Harbor run that is launched through
the API with the user's own Anthropic key and base and run by the runs cluster's worker
(issue 25's Tests).

The Harbor export builds the task FROM that image and says so (BELVEDIR_EXPORT_BASE_AGENTS):
Harbor finds `claude --version` answering and installs nothing, and the driver runs the agent
on a sandbox network with no egress. The user's provider is a local Anthropic-shaped fake on
127.0.0.1 (tests/drivers/claude_code_model.py), reached only by the router; Claude Code calls
the router's Messages API from its task sandbox with the run key, its Write tool writes the
answer, and the task's verifier scores it.
"""

import json
import subprocess

import pytest
from django.conf import settings

from billing.models import Kind
from billing.services import ledger_operator_entry
from harbor.models import TaskSandbox
from harnesses.catalog import HARBOR_INSTALL, HARBOR_REPO, HARBOR_RUN
from harnesses.drivers import served_url
from runs.models import Run
from runs.results import task_results
from tests.drivers.claude_code_model import ANSWER, ClaudeCodeModel
from tests.helpers.harbor import claude_code_image
from tests.helpers.offline_platform import offline_platform
from tests.runs.helpers import containers_of, wait_for
from traces.models import Span

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OWN_KEY = "sk-ant-user-claude-code-e2e-9d8c7b6a5f"
MODEL = "anthropic/claude-fake-4.5"
BARE_MODEL = MODEL.removeprefix("anthropic/")
TASK = {
    "id": "sum",
    "prompt": "What is 2+2? Answer with the number only.",
    "answer": ANSWER,
    "verifier": {
        "kind": "code",
        "source": "def verify(answer, state):\n    return answer.strip() == '4'\n",
    },
}
# Where a task sandbox may have written something (the image's own files are the image's).
WRITABLE = "/app /logs /tmp /root /home /workspace /etc /var /opt"
SEARCHED = "searched"  # what the search for the key prints last, having found nothing
# Each process of a container: a line `### <its command line>`, then its environment.
EACH_PROCESS = (
    "for p in /proc/[0-9]*; do echo \"### $(tr '\\0' ' ' < $p/cmdline)\"; "
    "tr '\\0' '\\n' < $p/environ; echo; done"
)


@pytest.fixture(scope="module")
def install(offline_network, live_server, django_db_setup, tmp_path_factory):
    """The offline platform (tests/helpers/offline_platform.py) whose Harbor exports build
    FROM the Claude Code image and say it holds claude-code. Yields the cluster's log."""
    image = claude_code_image()
    tmp = tmp_path_factory.mktemp("claude-code")
    with offline_platform(
        offline_network,
        live_server,
        tmp / "qcluster.log",
        asgi=True,  # the router streams Claude Code's calls
        BELVEDIR_CACHE_DIR=str(tmp / "cache"),
        BELVEDIR_EXPORT_BASE_IMAGE=image,
        BELVEDIR_EXPORT_BASE_AGENTS=["claude-code"],
        BELVEDIR_TASK_BASE_IMAGES=["belvedir-sandbox:latest", image],
    ) as log:
        yield log


def in_container(container_id: str, script: str, stdin: str = "") -> str:
    """`script` run by sh in the container (as its user), its output; `stdin` fed to it, so
    a secret searched for is in no process's arguments."""
    done = subprocess.run(
        ["docker", "exec", "-i", container_id, "sh", "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def look_inside(run_id: str) -> dict[str, dict[str, str]]:
    """What each of the run's containers (its sandbox, running Harbor, and the task sandbox,
    running Claude Code) holds: its configured env, every process's environment, and the
    files under WRITABLE that hold the user's key."""
    seen = {}
    for container in containers_of(run_id):
        processes = in_container(container.id, EACH_PROCESS)
        holding = in_container(
            container.id,
            f"grep -rIlF -f /dev/stdin {WRITABLE} 2>/dev/null; echo {SEARCHED}",
            OWN_KEY,
        )
        seen[container.attrs["Config"]["Image"]] = {
            "env": "\n".join(container.attrs["Config"]["Env"] or []),
            "processes": processes,
            "files": holding,
        }
    return seen


def claude_code_environment(processes: str) -> list[str]:
    """The environment of the `claude` process among EACH_PROCESS's output."""
    for block in processes.split("### ")[1:]:
        command, *environment = block.splitlines()
        if command.split(" ", 1)[0].rsplit("/", 1)[-1] in ("claude", "claude.exe"):
            return environment
    raise AssertionError(f"no claude process:\n{processes}")


def whole_api_output(api, run_id: str) -> tuple[str, list[dict]]:
    """Everything the API tells the run's project of it (the run, its log, its task sandboxes,
    and its sessions with their spans), and its sessions as listed."""
    sessions = api.get(f"/api/v1/sessions?run={run_id}").json()["results"]
    paths = [f"/api/v1/runs/{run_id}{tail}" for tail in ("", "/log", "/task-sandboxes")]
    paths += [f"/api/v1/sessions?run={run_id}"]
    paths += [f"/api/v1/sessions/{s['id']}?span_limit=2000" for s in sessions]
    answers = {path: api.get(path) for path in paths}
    assert {p: a.status_code for p, a in answers.items()} == dict.fromkeys(paths, 200)
    return "\n".join(a.content.decode() for a in answers.values()), sessions


def test_claude_code_runs_a_task_offline_through_the_proxy_and_the_users_key_stays_out(
    owner, install
):
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=5_000_000, note="claude-code"
    )
    inside = {}
    with ClaudeCodeModel() as provider:
        made = owner.api.post(
            "/api/v1/harnesses",
            {
                "name": "Claude Code on Harbor",
                "repo_url": served_url(HARBOR_REPO),
                "install_command": HARBOR_INSTALL,
                "run_command": HARBOR_RUN,
                "env": {"HARBOR_AGENT": "claude-code"},
                "tasks": json.dumps([TASK]),
            },
            format="json",
        )
        assert made.status_code == 201, made.json()
        launched = owner.api.post(
            "/api/v1/runs",
            {
                "harness": made.json()["id"],
                "model": MODEL,
                "model_api_base": provider.base_url,
                "model_api_key": OWN_KEY,
            },
            format="json",
        )
        assert launched.status_code == 201, launched.json()
        run_id = launched.json()["id"]
        # While Claude Code waits for the answer to its tool's result: look into its containers.
        provider.on_tool_result = lambda body: inside.update(look_inside(run_id))
        wait_for(
            lambda: Run.objects.get(pk=run_id).status in ("succeeded", "failed", "cancelled"),
            600,
            "the claude-code run to end",
            on_timeout=install.read_text,
        )
    run = Run.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.model_proxied and not run.covered
    # Claude Code's own Write tool wrote the answer the task's verifier scored.
    assert task_results(run.results) == {"sum": 1.0}, (run.results, run.log_tail)
    assert run.score == 1.0 and run.results["agent"] == "claude-code"
    assert [use["name"] for use in provider.tool_uses] == ["Write"], provider.tool_uses

    # Every call Claude Code made reached the user's provider from the router, with the
    # user's key; each is one LLM span of the run's session, billed to the provider.
    assert provider.requests, "Claude Code called no model"
    assert {s["authorization"] for s in provider.seen} == {f"Bearer {OWN_KEY}"}
    assert {s["path"].split("?")[0] for s in provider.seen} == {"/v1/messages"}, provider.seen
    calls = wait_for(
        lambda: (
            list(Span.objects.filter(run=run, from_router=True))
            if Span.objects.filter(run=run, from_router=True).count() >= len(provider.requests)
            else None
        ),
        30,
        "the router's spans of Claude Code's calls",
    )
    assert len(calls) == len(provider.requests)
    assert {s.session.external_id for s in calls} == {run.pk}
    assert {s.attributes["belvedir.router.billed_to"] for s in calls} == {"provider"}
    # Harbor hands Claude Code the bare model name, which the router reads as the catalog's;
    # the span's model is the one the provider answered with.
    assert {r["model"] for r in provider.requests} == {BARE_MODEL}
    assert {s.attributes["gen_ai.request.model"] for s in calls} == {MODEL}
    assert {s.model for s in calls} == {BARE_MODEL}

    # Inside the containers, mid-run: Claude Code's process had the router and the run key,
    # and no process, configured env or file held the user's key.
    assert len(inside) == 2, list(inside)  # the run's sandbox and the task sandbox
    (task_sandbox,) = [v for image, v in inside.items() if image.startswith("belvedir-task:")]
    claude = claude_code_environment(task_sandbox["processes"])
    router = settings.BELVEDIR_SANDBOX_BASE_URL.rstrip("/") + "/api"
    assert f"ANTHROPIC_BASE_URL={router}" in claude, claude
    assert any(line.startswith("ANTHROPIC_API_KEY=") for line in claude), claude
    for image, found in inside.items():
        assert found["files"] == f"{SEARCHED}\n", (image, found["files"])
        assert OWN_KEY not in found["env"] and OWN_KEY not in found["processes"], image

    # Nor the run's log, notes, results, spans, or anything the API says of the run.
    assert OWN_KEY not in run.log_tail and OWN_KEY not in json.dumps(run.notes)
    assert OWN_KEY not in json.dumps(run.results)
    assert not any(OWN_KEY in json.dumps(s.attributes) for s in Span.objects.filter(run=run))
    said, sessions = whole_api_output(owner.api, run.pk)
    assert OWN_KEY not in said
    assert [s["llm_call_count"] for s in sessions] == [len(provider.requests)]
    assert {s.status for s in TaskSandbox.objects.filter(run=run)} == {"stopped"}
    wait_for(lambda: containers_of(run.pk) == [], 30, "the run's containers to be removed")
