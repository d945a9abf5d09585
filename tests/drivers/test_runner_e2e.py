"""End to end: the catalog's Belvedir Runner card, launched through the API, in a real sandbox
on an offline install (nothing but the gateway reachable). The worker clones the driver the
platform serves; the Runner answers an environment of judge and rubric tasks with a scripted
OpenAI-compatible model and judge, three attempts folded by each grading rule, and traces into
the run's session with the belvedir SDK the sandbox image carries."""

import json

import pytest

from runs.executor import execute_run
from runs.models import Run
from tests.drivers.helpers import (
    AGENT_TOKEN,
    EXPECTED,
    SCRIPTS,
    TASKS_TEXT,
    AgentService,
    ScriptedLLM,
)
from tests.helpers.run_fixtures import serve_to_sandboxes
from traces.models import Session, Span

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def install(sandbox_settings, live_server, tmp_path):
    """The platform at the live server, with its own driver cache."""
    sandbox_settings.BELVEDIR_BASE_URL = live_server.url
    sandbox_settings.BELVEDIR_CACHE_DIR = str(tmp_path / "cache")
    return sandbox_settings


@pytest.fixture
def llm():
    """The model under test and the judge, where sandboxes reach them."""
    with serve_to_sandboxes(lambda host, port: ScriptedLLM(SCRIPTS, host=host, port=port)) as llm:
        yield llm


def model_and_judge(llm) -> dict:
    """Launch values: the scripted server as both the model under test and the judge."""
    return {
        "model": "model-under-test",
        "model_api_base": llm.base_url,
        "model_api_key": "sk-model-e2e",
        "judge_model": "judge",
        "judge_api_base": llm.base_url,
        "judge_api_key": "sk-judge-e2e",
    }


def runner_harness(owner, **env) -> dict:
    response = owner.api.post(
        "/api/v1/harnesses",
        {"preset": "runner", "name": "runner", "tasks": TASKS_TEXT, "env": env},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def environment_runner_harness(owner) -> dict:
    """An environment of the judge and rubric tasks, and the Runner card's harness it backs."""
    tasks = [json.loads(line) for line in TASKS_TEXT.splitlines()]
    response = owner.api.post(
        "/api/v1/environments",
        {"name": "support", "description": "judge and rubric tasks", "tasks": tasks},
        format="json",
    )
    assert response.status_code == 201, response.json()
    environment = response.json()["id"]
    response = owner.api.post(
        f"/api/v1/environments/{environment}/harness", {"preset": "runner"}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def launch(owner, capture, harness: dict, **values) -> Run:
    with capture(execute=False):
        response = owner.api.post(
            "/api/v1/runs", {"harness": harness["id"], **values}, format="json"
        )
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    execute_run(run_id)
    return Run.objects.get(pk=run_id)


def test_the_runner_card_grades_three_attempts_by_each_rule_and_traces_the_run(
    owner, install, llm, live_server, django_capture_on_commit_callbacks
):
    harness = environment_runner_harness(owner)
    assert harness["repo_url"] == f"{live_server.url}/git/belvedir-runner.git"
    assert harness["install_command"] == "python3 -m belvedir_runner --check"
    for rule in ("pass@1", "pass@k", "mean"):
        run = launch(
            owner,
            django_capture_on_commit_callbacks,
            harness,
            **model_and_judge(llm),
            attempts=3,
            grading=rule,
        )
        assert run.status == "succeeded", (run.notes, run.log_tail)
        assert run.score == pytest.approx(EXPECTED[rule]), rule
        results = run.results
        assert results["grading"] == rule and results["attempts"] == 3
        assert [t["id"] for t in results["tasks"]] == ["capital", "refund", "task-3"]
        refund = results["tasks"][1]
        assert refund["kind"] == "rubric" and refund["passed"] == 2
        assert [a["answer"] for a in refund["attempts"]] == ["half", "half", "bad"]
        assert [a["score"] for a in refund["attempts"]] == [0.6, 0.6, 0.2]
        assert refund["attempts"][0]["reason"] == "the answer is half"
        assert refund["attempts"][0]["tokens"] == {"input": 10, "output": 2}
        assert results["tokens"]["input"] == 90 and results["tokens"]["judge_output"] == 18
        assert "sk-model-e2e" not in run.log_tail and "sk-judge-e2e" not in json.dumps(results)

    # The last run's trace: one SDK task per task, and the model and judge calls under them.
    assert results["tracing"] == "sdk", (
        "the sandbox image has no belvedir SDK: rebuild it (manage.py sandbox_image --force)",
        run.log_tail,
    )
    session = Session.objects.get(project_id=run.project_id, external_id=run.pk)
    assert session.run_id == run.pk and session.outcome == "success"
    spans = list(Span.objects.filter(session=session))
    workflows = {s.name for s in spans if s.span_kind == "workflow"}
    assert workflows == {"capital.workflow", "refund.workflow", "task-3.workflow"}
    llm_spans = [s for s in spans if s.is_llm and not s.from_router]
    assert len(llm_spans) == 18  # 3 tasks x 3 attempts x (model + judge)
    assert {s.model for s in llm_spans} == {"model-under-test", "judge"}
    # Own keys go through the model proxy (issue 25): one call, one span. Each SDK span is
    # the duplicate of the router's span of the same call (the Runner's raw HTTP calls carry
    # no traceparent: paired by session, model, tokens and time, one to one).
    router = [s for s in spans if s.from_router]
    assert sorted(s.duplicate_of_id for s in llm_spans) == sorted(r.pk for r in router)
    session.refresh_from_db()
    assert session.llm_call_count == 18


def test_agent_url_mode_posts_each_task_to_the_service_and_grades_its_answers(
    owner, install, llm, django_capture_on_commit_callbacks
):
    def answer(body: dict) -> str:
        script = SCRIPTS[body["prompt"]]
        return script[(body["attempt"] - 1) % len(script)]

    service = serve_to_sandboxes(lambda host, port: AgentService(answer, host, port))
    try:
        harness = runner_harness(
            owner, BELVEDIR_AGENT_URL=service.url, BELVEDIR_AGENT_TOKEN=AGENT_TOKEN
        )
        run = launch(
            owner,
            django_capture_on_commit_callbacks,
            harness,
            judge_model="judge",
            judge_api_base=llm.base_url,
            judge_api_key="sk-judge-e2e",
            attempts=3,
            grading="pass@k",
        )
    finally:
        service.stop()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == pytest.approx(EXPECTED["pass@k"])
    assert run.results["agent_url"] == service.url and "model" not in run.results
    assert run.results["tokens"]["input"] == 63  # 9 answers x 7 tokens the service reported
    assert len(service.posts) == 9 and {p["auth"] for p in service.posts} == {
        f"Bearer {AGENT_TOKEN}"
    }
    capital = next(p["body"] for p in service.posts if p["body"]["id"] == "capital")
    assert set(capital) == {"id", "prompt", "attempt", "metadata"}
    assert llm.model_calls() == []  # the service answered, not a model
    assert AGENT_TOKEN not in run.log_tail


def test_a_task_list_with_code_or_state_diff_tasks_is_refused_naming_them(
    owner, install, llm, django_capture_on_commit_callbacks
):
    tasks = json.dumps(
        [
            {"id": "ok", "prompt": "Hi"},
            {
                "id": "sum",
                "prompt": "2+2?",
                "verifier": {"kind": "code", "source": "def verify(answer, state):\n    return 1"},
            },
        ]
    )
    harness = runner_harness(owner)
    owner.api.patch(f"/api/v1/harnesses/{harness['id']}", {"tasks": tasks}, format="json")
    run = launch(owner, django_capture_on_commit_callbacks, harness, **model_and_judge(llm))
    assert run.status == "failed"
    assert "sum (code) run under Harbor only" in run.log_tail
    assert run.stage == "installing"  # refused by the install step's check, before running
    assert llm.requests == []


def test_the_runner_card_with_its_judge_left_blank_is_judged_by_the_covered_default(
    owner, install, llm, django_capture_on_commit_callbacks
):
    """JUDGE_MODEL blank on the harness and at launch, no judge key: the run's judge is the
    operator's default (BELVEDIR_DEFAULT_JUDGE_MODEL), a covered model, called through the
    router with the operator's upstream key."""
    from models_registry.models import CoveredModel, Lab

    lab = Lab.objects.create(name="Judges", slug="judges", vendor_prefixes="judges")
    CoveredModel.objects.create(
        model_id="judge", display_name="Judge", lab=lab, input_price_micros=1, output_price_micros=1
    )
    install.BELVEDIR_ROUTER_UPSTREAM_BASE = llm.base_url
    install.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-upstream-operator"
    install.BELVEDIR_DEFAULT_JUDGE_MODEL = "judge"
    harness = runner_harness(owner)
    assert "JUDGE_MODEL" not in harness["env"]
    own_model = {k: v for k, v in model_and_judge(llm).items() if k.startswith("model")}
    run = launch(owner, django_capture_on_commit_callbacks, harness, **own_model)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.judge_model == "judge" and run.judge_covered and not run.model_covered
    assert run.results["judge_model"] == "judge"
    assert run.score == pytest.approx(2 / 3)  # one attempt each: good and half pass, bad fails
    judged = [r for r in llm.requests if r["body"]["model"] == "judge"]
    assert len(judged) == 3
    assert {r["headers"]["Authorization"] for r in judged} == {"Bearer sk-upstream-operator"}
