"""End to end, on an offline install: Harbor harnesses launched through the API, run by the
worker in the Harbor image's sandbox, each task in a task sandbox the Belvedir Harbor
environment asks the platform for (docs/task-sandboxes.md), through the sandbox gateway.

- Runner-on-Harbor over an environment holding all four verifier kinds
  (its Tasks field, exported as a Harbor dataset at launch and fetched with the run's key):
  the `belvedir` agent, calling a
  covered model through the router, scores what its answers are worth, and its calls are spans
  in the run's session. (Harbor's `oracle` on it scores 1.0 on the platform as `make up` serves
  it, queue workers and all: tests/test_make_up.py.)
- A suite card on the sample dataset shipped with the driver (`belvedir-sample`), with Harbor's
  `oracle`, and with Harbor's own `terminus-2` agent driving a tmux session in the task sandbox
  while a scripted model (through the router) types the answer.

The catalog's cards exactly as prefilled (Runner on Harbor, the suites and the scaffolds,
offline): tests/harnesses/test_catalog_e2e.py.
"""

import json

import docker
import pytest

from billing.models import Kind
from billing.services import ledger_operator_entry
from harbor.models import TaskSandbox
from harnesses.environments import environment_create, environment_harness_create
from harnesses.services import harness_create, harness_update
from runs.contract import run_model_secrets, run_sandbox_env
from runs.executor import execute_run
from runs.models import Run
from runs.results import task_results
from tests.drivers.helpers import AGENT_TOKEN, AgentService
from tests.helpers.harbor import FOUR_KINDS, harbor_image
from tests.helpers.run_fixtures import serve_to_sandboxes
from tests.helpers.scripted_model import ScriptedModel
from tests.router.fake_upstream import FakeUpstream
from tests.runs.helpers import containers_of, wait_for
from tests.traces.fake_openai import FakeOpenAI
from traces.models import Span

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

COVERED = "fakelab/fake-model"
JUDGE_KEY = "sk-judge-e2e"


@pytest.fixture(scope="module")
def image():
    return harbor_image()


@pytest.fixture
def install(image, sandbox_settings, live_server, tmp_path, owner):
    """The platform at the live server (API, router, served drivers), offline: exported tasks
    build FROM the local sandbox image; the owner's organization holds credits."""
    sandbox_settings.BELVEDIR_BASE_URL = live_server.url
    sandbox_settings.BELVEDIR_CACHE_DIR = str(tmp_path / "cache")
    sandbox_settings.BELVEDIR_EXPORT_BASE_IMAGE = "belvedir-sandbox:latest"
    sandbox_settings.BELVEDIR_HARBOR_IMAGE = image
    sandbox_settings.BELVEDIR_SANDBOX_MEMORY = "2g"
    sandbox_settings.BELVEDIR_RUN_TIMEOUT = 1200
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=5_000_000, note="e2e"
    )
    return sandbox_settings


@pytest.fixture
def judge():
    """The independent judge, where task sandboxes reach it: every answer is worth 1."""
    with serve_to_sandboxes(
        lambda host, port: FakeOpenAI(reply='{"score": 1, "reason": "fine"}', host=host, port=port)
    ) as fake:
        yield fake


def four_kinds_harness(owner, tasks=FOUR_KINDS, **env):
    environment = environment_create(
        project=owner.project, created_by=owner.user, name="Four kinds", tasks=tasks
    )
    harness = environment_harness_create(environment=environment, preset="harbor-runner")
    # Its Tasks field is what runs: the platform's Harbor export of the run's Tasks.
    assert "HARBOR_DATASET" not in harness.env and harness.tasks
    return harness_update(harness=harness, env={**harness.env, **env})


def launch(owner, capture, harness, **values) -> Run:
    with capture(execute=False):
        response = owner.api.post("/api/v1/runs", {"harness": harness.pk, **values}, format="json")
    assert response.status_code == 201, response.json()
    execute_run(response.json()["id"])
    return Run.objects.get(pk=response.json()["id"])


def judged_by(judge) -> dict:
    return {
        "judge_model": "acme/judge",
        "judge_api_base": judge.base_url,
        "judge_api_key": JUDGE_KEY,
    }


def assert_every_task_sandbox_stopped(run: Run, count: int) -> None:
    sandboxes = list(TaskSandbox.objects.filter(run=run))
    assert len(sandboxes) == count
    assert {s.status for s in sandboxes} == {"stopped"}
    # The queue worker marks the run finished, then removes its sandbox: within moments.
    wait_for(lambda: containers_of(run.pk) == [], 30, "the run's containers to be removed")


class PassesOnce(FakeOpenAI):
    """The judge: the first answer it grades is worth 1, every later one 0."""

    def completion(self, body: dict, number: int) -> dict:
        document = super().completion(body, number)
        verdict = {"score": 1 if number == 1 else 0, "reason": "first" if number == 1 else "no"}
        document["choices"][0]["message"]["content"] = json.dumps(verdict)
        return document


def test_a_runs_attempts_are_trials_folded_by_its_grading_as_the_runner_folds_them(
    owner, install, django_capture_on_commit_callbacks
):
    """attempts=3, pass@k on Runner on Harbor: Harbor runs the judged task three times, the
    judge passes it once, the task (and the run) score 1 (pass@1 would be 1/3:
    test_harbor_run.py folds the same rewards both ways, against the Runner). HARBOR_N_TASKS=1
    of the environment's two tasks: the run says it ran 1 of 2."""
    with serve_to_sandboxes(lambda host, port: PassesOnce(host=host, port=port)) as judge:
        environment = environment_create(
            project=owner.project, created_by=owner.user, name="Two", tasks=FOUR_KINDS[:2]
        )
        harness = environment_harness_create(environment=environment, preset="harbor-runner")
        env = {**harness.env, "HARBOR_AGENT": "oracle", "HARBOR_N_TASKS": "1"}
        harness = harness_update(harness=harness, env=env)
        run = launch(
            owner,
            django_capture_on_commit_callbacks,
            harness,
            attempts=3,
            grading="pass@k",
            model="oracle",
            **judged_by(judge),
        )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    capital = run.results["tasks"]["capital"]
    assert sorted(capital["attempts"]) == [0.0, 0.0, 1.0], run.results
    assert capital["score"] == 1.0 and capital["errored"] == 0
    assert run.score == 1.0 and run.results["grading"] == "pass@k"
    assert run.results["attempts"] == 3 and run.results["n_trials"] == 3
    assert "--n-attempts 3" in run.log_tail
    assert len(judge.requests) == 3
    assert list(run.results["tasks"]) == ["capital"]
    assert "belvedir: ran 1 of 2 tasks (HARBOR_N_TASKS=1)." in run.notes
    assert "belvedir: ran 1 of 2 tasks (HARBOR_N_TASKS=1)." in (
        owner.web.get(f"/runs/{run.pk}/").content.decode()
    )
    assert_every_task_sandbox_stopped(run, 3)


OWN_KEY = "sk-user-harbor-e2e-5e4d3c2b1a"
OWN_MODEL = "acme/own-model"


def test_a_harbor_run_with_the_users_own_key_goes_through_the_proxy_and_the_key_stays_out(
    owner, install, judge, django_capture_on_commit_callbacks
):
    """Issue 25: a Harbor run (the `belvedir` agent) launched with the user's own key and base:
    the driver's sandbox gets the router and the run key, the router forwards each task's
    call to the user's provider with the user's key, every call is a span billed to the
    provider, and the key is in no sandbox env, log, note, result, span or API answer."""
    with FakeUpstream(words=5) as provider:  # the user's provider, reached by the router
        harness = four_kinds_harness(owner, HARBOR_AGENT="belvedir")
        run = launch(
            owner,
            django_capture_on_commit_callbacks,
            harness,
            model=OWN_MODEL,
            model_api_base=provider.base_url,
            model_api_key=OWN_KEY,
            **judged_by(judge),
        )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.model_proxied and not run.covered
    assert task_results(run.results) == {"capital": 1.0, "refund": 1.0, "sum": 0.0, "todo": 0.0}
    # Each task's call reached the provider from the router, with the user's key.
    assert [s["authorization"] for s in provider.seen] == [f"Bearer {OWN_KEY}"] * 4
    prompts = sorted(r["messages"][-1]["content"].split("\n")[0] for r in provider.requests)
    assert prompts == sorted(t["prompt"] for t in FOUR_KINDS)
    calls = Span.objects.filter(run=run, from_router=True, model=OWN_MODEL)
    assert calls.count() == 4
    assert {s.attributes["belvedir.router.billed_to"] for s in calls} == {"provider"}
    # What the driver's sandbox was given: the router and the run key, never the user's key.
    env = run_sandbox_env(run, secrets=run_model_secrets(run))
    assert env["MODEL_API_BASE"].endswith("/api/v1") and env["MODEL_API_BASE"] != provider.base_url
    assert env["MODEL_API_KEY"] != OWN_KEY and not any(OWN_KEY in v for v in env.values())
    spans = Span.objects.filter(run=run)
    assert not any(OWN_KEY in json.dumps(s.attributes) for s in spans)
    answer = owner.api.get(f"/api/v1/runs/{run.pk}").content.decode()
    assert OWN_KEY not in answer and OWN_KEY not in run.log_tail and OWN_KEY not in run.notes
    assert OWN_KEY not in json.dumps(run.results)
    assert_every_task_sandbox_stopped(run, 4)


def test_the_belvedir_agent_calls_the_router_and_its_calls_are_traced(
    owner, install, judge, fakelab_model, settings, django_capture_on_commit_callbacks
):
    with FakeUpstream(words=5) as upstream:  # every answer is "w0 w1 w2 w3 w4"
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE = upstream.base_url
        settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-upstream-operator"
        # Two groups (docs/tasks-format.md, metadata.group): the judged and the checked tasks.
        groups = {"capital": "judged", "refund": "judged", "sum": "checked", "todo": "checked"}
        tasks = [{**task, "group": groups[task["id"]]} for task in FOUR_KINDS]
        harness = four_kinds_harness(owner, tasks, HARBOR_AGENT="belvedir")
        run = launch(
            owner, django_capture_on_commit_callbacks, harness, model=COVERED, **judged_by(judge)
        )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.covered
    # The judge likes every answer; `sum` wants "4" and `todo` an edited file, which this
    # one-call agent does not make.
    assert task_results(run.results) == {"capital": 1.0, "refund": 1.0, "sum": 0.0, "todo": 0.0}
    assert run.score == 0.5
    # The driver wrote each task's group, and the score's standard error is clustered by it:
    # 0.5 over 2 groups (0.289 over 4 independent tasks).
    assert {name: t.get("group") for name, t in run.results["tasks"].items()} == groups
    assert run.score_stderr == pytest.approx(0.5) and run.n_tasks == 4
    assert run.results["agent"] == "belvedir" and run.results["model"] == COVERED
    # Each task's model call went through the router to the upstream, and is a span of the
    # run's session.
    assert len(upstream.requests) == 4
    prompts = sorted(r["messages"][-1]["content"].split("\n")[0] for r in upstream.requests)
    assert prompts == sorted(t["prompt"] for t in FOUR_KINDS)
    routed = Span.objects.filter(run=run, attributes__has_key="belvedir.router.cost_micros")
    calls = [s for s in routed if s.model == COVERED]
    assert len(calls) == 4
    assert {s.session.external_id for s in routed} == {run.pk}
    # The judge's own key goes through the model proxy too (issue 25): the two judged tasks'
    # verdicts are router spans billed to the judge's provider, the rest the covered model's.
    judged = [s for s in routed if s.model != COVERED]
    assert [s.model for s in judged] == ["acme/judge"] * 2
    assert {s.attributes["belvedir.router.billed_to"] for s in judged} == {"provider"}
    assert_every_task_sandbox_stopped(run, 4)


def test_the_belvedir_agent_asks_the_agent_service_for_each_task(
    owner, install, judge, django_capture_on_commit_callbacks
):
    """BELVEDIR_AGENT_URL and BELVEDIR_AGENT_TOKEN on Runner on Harbor: the Belvedir Harbor
    agent posts each task to the service (a local one, where sandboxes reach it) with the
    token as its bearer and writes the reply as the answer the verifiers grade; no model."""

    def answer(body: dict) -> str:
        return "4" if "2+2" in body["prompt"] else "Paris"

    service = serve_to_sandboxes(lambda host, port: AgentService(answer, host, port))
    try:
        environment = environment_create(
            project=owner.project,
            created_by=owner.user,
            name="Service",
            tasks=[FOUR_KINDS[0], FOUR_KINDS[2]],
        )
        harness = environment_harness_create(environment=environment, preset="harbor-runner")
        env = {**harness.env, "BELVEDIR_AGENT_URL": service.url}
        env["BELVEDIR_AGENT_TOKEN"] = AGENT_TOKEN
        harness = harness_update(harness=harness, env=env)
        run = launch(owner, django_capture_on_commit_callbacks, harness, **judged_by(judge))
    finally:
        service.stop()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert task_results(run.results) == {"capital": 1.0, "sum": 1.0}
    assert run.score == 1.0 and run.results["agent"] == "belvedir" and not run.covered
    assert len(service.posts) == 2
    assert {p["auth"] for p in service.posts} == {f"Bearer {AGENT_TOKEN}"}
    prompts = sorted(p["body"]["prompt"].split("\n")[0] for p in service.posts)
    assert prompts == sorted([FOUR_KINDS[0]["prompt"], FOUR_KINDS[2]["prompt"]])
    assert AGENT_TOKEN not in run.log_tail
    assert_every_task_sandbox_stopped(run, 2)


def test_a_suite_card_runs_the_sample_dataset_offline(
    owner, install, django_capture_on_commit_callbacks
):
    harness = harness_create(
        project=owner.project,
        created_by=owner.user,
        preset="terminal-bench-2-1",
        name="sample suite",
        env={"HARBOR_DATASET": "belvedir-sample", "HARBOR_AGENT": "oracle", "HARBOR_N_TASKS": ""},
    )
    # The oracle calls no model: no key, nothing covered; MODEL only tags the run.
    run = launch(owner, django_capture_on_commit_callbacks, harness, model="oracle")
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert not run.covered and run.model == "oracle" and run.results["model"] == "oracle"
    assert task_results(run.results) == {"capital": 1.0, "hello": 1.0, "sum": 1.0}
    assert run.score == 1.0 and run.results["dataset"] == "belvedir-sample"
    assert_every_task_sandbox_stopped(run, 3)


def test_a_run_whose_task_images_cannot_build_fails_instead_of_scoring_zero(
    owner, install, judge, django_capture_on_commit_callbacks
):
    """Offline `make up` before its export base was set: the tasks build FROM an image the
    platform refuses (outside BELVEDIR_TASK_BASE_IMAGES, a 400), every trial errors in Harbor,
    and the run fails with a note, where it used to show "succeeded, 0.000" in the charts."""
    install.BELVEDIR_EXPORT_BASE_IMAGE = "python:3.13-slim"
    install.BELVEDIR_TASK_BASE_IMAGES = ["belvedir-sandbox:latest"]
    harness = four_kinds_harness(owner, HARBOR_AGENT="oracle", HARBOR_TASK_NAMES="capital,sum")
    values = {"model": "oracle", "model_api_base": judge.base_url, "model_api_key": "sk-unused"}
    run = launch(owner, django_capture_on_commit_callbacks, harness, **values, **judged_by(judge))
    assert run.status == "failed", (run.notes, run.log_tail)
    assert run.score is None
    results = run.results
    assert results["score"] is None
    assert results["tasks"] == {
        "capital": {"attempts": [], "score": None, "errored": 1},
        "sum": {"attempts": [], "score": None, "errored": 1},
    }
    assert set(results["errored"]) == {"capital", "sum"}
    assert all(why.startswith("SandboxBuildFailedError") for why in results["errored"].values())
    assert "python:3.13-slim" in results["errored"]["sum"], results["errored"]
    assert run.notes[0].startswith(
        "belvedir: every task errored (2 of 2) before it could be scored, so the run has no "
        "score: capital: SandboxBuildFailedError"
    ), run.notes
    assert "belvedir: the run command exited with code 3." in run.notes
    assert run.notes[-1] == (
        "belvedir: the harness-harbor driver said: every trial errored (2 of 2), so there is "
        "no score: see errored in results.json."
    )
    assert not judge.requests  # no verifier ran


# Terminus-2's JSON answers: type the answer into the task's shell and say it is done, then
# confirm when it asks "Are you sure...?" (its second `task_complete` ends the episode loop).
TERMINUS_TYPES_THE_ANSWER = json.dumps(
    {
        "analysis": "A shell in /app; the task wants the word hello in /app/answer.md.",
        "plan": "Write the answer file and check it.",
        "commands": [
            {"keystrokes": "printf 'hello\\n' > /app/answer.md\n", "duration": 0.5},
            {"keystrokes": "cat /app/answer.md\n", "duration": 0.5},
        ],
        "task_complete": True,
    }
)
TERMINUS_CONFIRMS = json.dumps(
    {"analysis": "The file holds hello.", "plan": "Done.", "commands": [], "task_complete": True}
)


def test_terminus_2_solves_a_sample_task_in_a_task_sandbox_through_the_router(
    owner, install, fakelab_model, settings, django_capture_on_commit_callbacks
):
    # tmux (and asciinema, for its recording) come with the sandbox image the task builds
    # FROM: offline, Terminus-2 could not install them.
    tools = docker.from_env().containers.run(
        "belvedir-sandbox:latest", ["sh", "-c", "tmux -V && asciinema --version"], remove=True
    )
    assert b"tmux" in tools, "rebuild the sandbox image: python manage.py sandbox_image --force"
    with ScriptedModel([TERMINUS_TYPES_THE_ANSWER, TERMINUS_CONFIRMS]) as model:
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE = model.base_url
        settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-upstream-operator"
        harness = harness_create(
            project=owner.project,
            created_by=owner.user,
            preset="terminal-bench-2-1",
            name="terminus on the sample",
            env={
                "HARBOR_DATASET": "belvedir-sample",
                "HARBOR_AGENT": "terminus-2",
                "HARBOR_TASK_NAMES": "hello",
                "HARBOR_N_TASKS": "",
            },
        )
        run = launch(owner, django_capture_on_commit_callbacks, harness, model=COVERED)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.covered
    # The verifier found "hello" in /app/answer.md: the keystrokes ran in the task's tmux.
    assert task_results(run.results) == {"hello": 1.0}, (run.results, run.log_tail)
    assert run.score == 1.0 and run.results["errors"] == {}
    assert run.results["agent"] == "terminus-2" and run.results["model"] == COVERED
    assert "-a terminus-2" in run.log_tail and "-m openai/fakelab/fake-model" in run.log_tail
    # Two turns: the task with the pane's screen, then its "Are you sure?" after the first
    # task_complete, showing the command's output.
    assert len(model.requests) == 2
    first, second = (r["messages"][-1]["content"] for r in model.requests)
    assert "Say hello" in first and "Current terminal state" in first
    assert "Are you sure you want to mark the task as complete?" in second
    assert "hello" in second.split("Are you sure")[0]
    assert {r["model"] for r in model.requests} == {COVERED}
    calls = Span.objects.filter(run=run, attributes__has_key="belvedir.router.cost_micros")
    assert calls.count() == 2
    assert {s.session.external_id for s in calls} == {run.pk}
    assert {s.model for s in calls} == {COVERED}
    assert_every_task_sandbox_stopped(run, 1)
