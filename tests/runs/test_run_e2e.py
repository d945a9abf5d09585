"""Runs end to end, with the real Docker engine and the sandbox image: every contract rule.

Each test launches the example harness (examples/contract-harness, committed into a local
git repo) and executes it in a real sandbox; the harness's env knobs choose what it does.
"""

import json
import time
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.test import APIClient

from belvedir import crypto
from belvedir.models import ApiKey
from runs.executor import execute_run
from runs.models import Run
from tests.runs.helpers import closed_port, containers_of, git

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def run_it(run: Run) -> Run:
    """Execute the run as a worker would; every run, whatever its end, leaves no container."""
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.is_terminal, run.status
    assert containers_of(run.pk) == [], "the sandbox was not removed at the end of the run"
    return run


def belvedir_notes(run: Run) -> list[str]:
    return [n for n in run.notes if n.startswith("belvedir:")]


# --- the env in -------------------------------------------------------------------------------


def test_a_run_that_writes_a_score_succeeds_with_the_contract_env(sandbox_settings, launch):
    run = run_it(
        launch(
            env={
                "HARNESS_OWN": "mine",
                "MODEL": "harness-default",
                "MODEL_API_BASE": "https://harness.example/v1",
                "JUDGE_MODEL": "harness-judge",
            },
            tasks='[{"id": "t1"}]',
            model="openai/gpt-4.1-mini",
            model_api_base="http://127.0.0.1:9/v1",
            judge_api_base="http://127.0.0.1:9/judge",
            attempts=3,
            grading="pass@k",
        )
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == pytest.approx(0.85)
    assert run.exit_code == 0 and run.notes == []
    seen = run.results["seen_env"]
    assert seen["BELVEDIR_RUN_ID"] == run.pk == seen["FRACTAL_RUN_ID"]
    gateway = sandbox_settings.BELVEDIR_SANDBOX_BASE_URL
    assert gateway.startswith("http://172.30.0.1:187")
    assert seen["BELVEDIR_BASE_URL"] == gateway == seen["FRACTAL_BASE_URL"]
    # The run key reached the sandbox; echoed into results, it is redacted like every secret.
    assert seen["BELVEDIR_API_KEY"] == "[redacted]" == seen["FRACTAL_API_KEY"]
    assert seen["BELVEDIR_TASK_ATTEMPTS"] == "3" and seen["BELVEDIR_GRADING"] == "pass@k"
    assert seen["BELVEDIR_TASKS_FILE"] == seen["FRACTAL_TASKS_FILE"]
    assert seen["BELVEDIR_TASKS_FILE"].endswith("tasks.json")
    assert run.results["tasks_preview"] == '[{"id": "t1"}]'
    assert seen["HARNESS_OWN"] == "mine"
    # Model settings given at launch win over the harness env ...
    assert seen["MODEL"] == "openai/gpt-4.1-mini"
    assert seen["MODEL_API_BASE"] == "http://127.0.0.1:9/v1"
    assert seen["JUDGE_API_BASE"] == "http://127.0.0.1:9/judge"
    # ... and one left blank at launch keeps the harness's value.
    assert seen["JUDGE_MODEL"] == "harness-judge"
    assert run.results["model"] == "openai/gpt-4.1-mini"
    assert run.results["uid"] == 1000
    assert ApiKey.objects.get(ingest_run=run).revoked_at is not None
    assert "installing contract-harness" in run.log_tail


def test_a_harness_without_tasks_gets_no_tasks_file_and_default_attempts(sandbox_settings, launch):
    run = run_it(launch())
    assert run.status == "succeeded", (run.notes, run.log_tail)
    seen = run.results["seen_env"]
    assert seen["BELVEDIR_TASKS_FILE"] is None and seen["FRACTAL_TASKS_FILE"] is None
    assert run.results["tasks_preview"] is None
    assert seen["BELVEDIR_TASK_ATTEMPTS"] == "1" and seen["BELVEDIR_GRADING"] == "pass@1"
    assert run.results["has_model_api_key"] is False
    assert "model" not in run.results  # no model at launch, none reported


def test_a_text_tasks_file_is_downloaded_verbatim(sandbox_settings, launch):
    tasks = "fix the login bug\nwrite the release notes ✓\n"
    run = run_it(launch(tasks=tasks))
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["seen_env"]["BELVEDIR_TASKS_FILE"].endswith("tasks.txt")
    assert run.results["tasks_preview"] == tasks


def test_a_tasks_file_that_cannot_be_downloaded_fails_the_run_before_anything_runs(
    sandbox_settings, launch
):
    sandbox_settings.BELVEDIR_SANDBOX_BASE_URL = f"http://127.0.0.1:{closed_port()}"
    run = run_it(launch(tasks='[{"id": "t1"}]'))
    assert run.status == "failed"
    assert run.score is None and run.results is None
    assert any("Tasks file could not be downloaded" in n for n in belvedir_notes(run)), run.notes
    assert "belvedir: the Tasks file could not be downloaded" in run.log_tail
    # It never runs taskless: neither the install nor the run command started.
    assert "installing contract-harness" not in run.log_tail
    assert "starting in" not in run.log_tail


# --- the repo ---------------------------------------------------------------------------------


@pytest.fixture
def repo_with_refs(contract_repo):
    """The example repo with marker.txt: 'first' at an old commit, 'branch' on branch
    `other`, 'main' at the tip of main."""
    path = Path(contract_repo.removeprefix("file://"))

    def commit(text: str) -> str:
        (path / "marker.txt").write_text(text + "\n")
        git(path, "add", "marker.txt")
        git(path, "commit", "-qm", text)
        return git(path, "rev-parse", "HEAD")

    first = commit("first")
    git(path, "checkout", "-q", "-b", "other")
    commit("branch")
    git(path, "checkout", "-q", "main")
    commit("main")
    return {"first": first}


@pytest.mark.parametrize(
    "ref, marker",
    [("", "main"), ("other", "branch"), ("first commit", "first")],
    ids=["default-branch", "branch", "commit"],
)
def test_the_repo_is_cloned_at_the_harness_ref(
    sandbox_settings, launch, repo_with_refs, ref, marker
):
    ref = repo_with_refs["first"] if ref == "first commit" else ref
    run = run_it(launch(harness={"ref": ref}))
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["marker"] == marker


def test_install_runs_first_then_the_run_command_at_the_repo_root(sandbox_settings, launch):
    run = run_it(launch())
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["cwd"] == "/workspace/repo"
    log = run.log_tail
    installed = log.index("installing contract-harness as sandbox in /workspace/repo")
    assert installed < log.index("starting in /workspace/repo as uid 1000")


def test_a_failing_install_fails_the_run_and_the_run_command_never_runs(sandbox_settings, launch):
    run = run_it(launch(env={"INSTALL_FAIL": "1"}))
    assert run.status == "failed"
    assert run.exit_code == 3 and run.score is None
    assert "belvedir: the install command exited with code 3." in run.notes
    assert "install failed on purpose" in run.log_tail
    assert "belvedir: the install command exited with code 3." in run.log_tail
    assert "starting in" not in run.log_tail


# --- results.json out -------------------------------------------------------------------------

SCORE_RULES = [
    # (harness env, status, score, a note that must be in notes and the log tail)
    ({"SCORE": "0.85"}, "succeeded", 0.85, None),
    ({"SCORE": "0"}, "succeeded", 0.0, None),
    ({"SCORE": "1"}, "succeeded", 1.0, None),
    ({"SCORE": "85"}, "succeeded", 0.85, "belvedir: score 85 read as a percentage: 0.85."),
    ({"SCORE": "100"}, "succeeded", 1.0, "belvedir: score 100 read as a percentage: 1."),
    ({"SCORE": "100.5"}, "failed", None, "the score 100.5 is over 100"),
    ({"SCORE": "-0.1"}, "failed", None, "the score -0.1 is negative"),
    ({"SCORE": '"0.5"'}, "failed", None, "the score must be a number, not a string"),
    ({"SCORE": "true"}, "failed", None, "the score must be a number, not a boolean"),
    ({"SCORE": "null"}, "failed", None, "the score must be a number, not null"),
    ({"SCORE": "NaN"}, "failed", None, "the score must be a number, not NaN"),
    ({"SCORE": "Infinity"}, "failed", None, "the score must be a number, not Infinity"),
    ({"SCORE": "omit"}, "failed", None, "results.json has no top-level score"),
    ({"NO_RESULTS": "1"}, "failed", None, "exited 0 but wrote no results.json"),
    ({"RESULTS_RAW": '{"score": 0.5,'}, "failed", None, "results.json is not valid JSON"),
    ({"RESULTS_RAW": "[0.5]"}, "failed", None, "results.json must hold a JSON object"),
    ({"BIG_RESULTS": "1"}, "failed", None, "over the 256 KB limit"),
    ({"EXIT_CODE": "3"}, "failed", None, "the run command exited with code 3"),
]


@pytest.mark.parametrize(
    "env, status, score, note",
    SCORE_RULES,
    ids=[next(iter(e.items()))[0] + "=" + next(iter(e.values())) for e, *_ in SCORE_RULES],
)
def test_results_json_follows_the_score_rules(sandbox_settings, launch, env, status, score, note):
    run = run_it(launch(env=env))
    assert run.status == status, (run.notes, run.log_tail)
    if score is None:
        assert run.score is None
    else:
        assert run.score == pytest.approx(score)
    if note is None:
        assert belvedir_notes(run) == []
    else:
        assert any(note in n for n in belvedir_notes(run)), run.notes
        assert note in run.log_tail


def test_a_non_zero_exit_keeps_the_results_but_records_no_score(sandbox_settings, launch):
    run = run_it(launch(env={"EXIT_CODE": "5", "SCORE": "0.9"}))
    assert run.status == "failed" and run.exit_code == 5
    assert run.score is None
    assert run.results["passed"] == 17  # kept for the user to read


def test_a_run_whose_every_task_errored_fails_with_a_note_and_no_score(sandbox_settings, launch):
    """An infrastructure failure is never a score: tasks that could not run are listed under
    `errored`, and when nothing else is left the run fails instead of "succeeded, 0.000"."""
    written = {
        "score": 0.0,
        "tasks": {"sum": None, "hello": None},
        "errored": {"sum": "SandboxBuildFailedError: FROM refused", "hello": "HealthcheckError"},
    }
    run = run_it(launch(env={"RESULTS_RAW": json.dumps(written)}))
    assert run.status == "failed", (run.notes, run.log_tail)
    assert run.score is None
    note = (
        "belvedir: every task errored (2 of 2) before it could be scored, so the run has no "
        "score: sum: SandboxBuildFailedError: FROM refused; hello: HealthcheckError."
    )
    assert belvedir_notes(run) == [note]
    assert note in run.log_tail
    assert run.results["errored"] == written["errored"]  # kept for the user to read


def test_errored_tasks_are_left_out_of_the_score_with_a_note(sandbox_settings, launch):
    written = {
        "score": 0.5,
        "tasks": {"sum": 1.0, "hello": 0.0},
        "errored": {"capital": "VerifierOutputParseError: no reward"},
    }
    run = run_it(launch(env={"RESULTS_RAW": json.dumps(written)}))
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == pytest.approx(0.5)
    assert belvedir_notes(run) == [
        "belvedir: 1 of 3 tasks errored and are not in the score: "
        "capital: VerifierOutputParseError: no reward."
    ]


def test_everything_else_in_results_json_is_stored_verbatim(sandbox_settings, launch):
    written = {
        "score": 0.5,
        "tasks": [{"id": "t1", "passed": True, "cost": 0.0012, "tags": []}, {"id": "t2"}],
        "summary": {"text": "naïve ✓ ünïcode", "nothing": None, "big": 12345678901234},
    }
    run = run_it(
        launch(
            env={"RESULTS_RAW": json.dumps(written)}, model="acme/model-1", model_api_key="sk-e2e"
        )
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results == {**written, "model": "acme/model-1"}


def test_a_model_reported_by_the_harness_is_kept_aside_with_a_note(sandbox_settings, launch):
    run = run_it(
        launch(env={"REPORT_MODEL": "other/model"}, model="acme/model-1", model_api_key="sk-e2e")
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["model"] == "acme/model-1"
    assert run.results["model_reported"] == "other/model"
    note = next(n for n in run.notes if "model_reported" in n)
    assert "'other/model'" in note and "'acme/model-1'" in note
    assert note in run.log_tail


def test_a_model_reported_that_matches_the_launch_needs_no_note(sandbox_settings, launch):
    run = run_it(
        launch(env={"REPORT_MODEL": "acme/model-1"}, model="acme/model-1", model_api_key="sk-e2e")
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["model"] == "acme/model-1"
    assert "model_reported" not in run.results and run.notes == []


def test_a_run_past_the_time_cap_is_killed_and_failed_with_a_note(sandbox_settings, launch):
    sandbox_settings.BELVEDIR_RUN_TIMEOUT = 3
    run = launch(env={"SLEEP": "30"})
    started = time.monotonic()
    run = run_it(run)
    assert time.monotonic() - started < 15, "the run was not stopped at its time cap"
    assert run.status == "failed" and run.score is None
    assert "belvedir: the run took longer than its 3 s limit and was stopped." in run.notes
    assert "tick 1" in run.log_tail and "done" not in run.log_tail
    assert "longer than its 3 s limit" in run.log_tail


# --- secrets, the run key, the sandbox --------------------------------------------------------

MODEL_KEY = "sk-model-7f3a9c2e1b5d"
JUDGE_KEY = "sk-judge-4d8e6f0a2c9b"


def test_model_and_judge_keys_are_redacted_everywhere_but_stored_encrypted(
    sandbox_settings, launch, owner
):
    run = run_it(
        launch(
            # The harness prints both keys, and writes the model key into results.json as the
            # model it ran, which the platform quotes in a note.
            env={"ECHO_SECRET": "1", "REPORT_MODEL": "$MODEL_API_KEY"},
            model="acme/model-1",
            model_api_key=MODEL_KEY,
            judge_api_key=JUDGE_KEY,
        )
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["has_model_api_key"] is True  # it did reach the sandbox
    assert "the model key is [redacted]" in run.log_tail
    assert "the judge key is [redacted]" in run.log_tail
    assert run.results["model_reported"] == "[redacted]"
    assert any("reported model '[redacted]'" in n for n in run.notes), run.notes
    log = owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 0}).json()
    # Offsets count the redacted log, so the whole log reads back from offset 0.
    assert log["truncated"] is False and log["offset"] == len(log["text"]) == run.log_size

    responses = [
        owner.api.get(f"/api/v1/runs/{run.pk}"),
        owner.api.get("/api/v1/runs"),
        owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 0}),
        owner.web.get(f"/runs/{run.pk}/"),
    ]
    for response in responses:
        assert response.status_code == 200
        body = response.content.decode()
        assert run.pk in body
        assert MODEL_KEY not in body and JUDGE_KEY not in body

    with connection.cursor() as cursor:
        cursor.execute("SELECT r::text FROM runs_run r WHERE id = %s", [run.pk])
        (row,) = cursor.fetchone()
    assert run.pk in row
    assert MODEL_KEY not in row and JUDGE_KEY not in row, "a key is stored in plaintext"
    assert crypto.decrypt(run.model_api_key_encrypted) == MODEL_KEY
    assert crypto.decrypt(run.judge_api_key_encrypted) == JUDGE_KEY


def test_the_run_key_works_during_the_run_and_is_revoked_after_it(sandbox_settings, launch):
    run = launch(tasks="task one\n")
    sandbox = APIClient()
    sandbox.credentials(HTTP_AUTHORIZATION=f"Bearer {crypto.decrypt(run.run_key_encrypted)}")
    before = sandbox.get(f"/api/v1/runs/{run.pk}/tasks")
    assert before.status_code == 200 and before.content == b"task one\n"

    run = run_it(run)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert sandbox.get(f"/api/v1/runs/{run.pk}/tasks").status_code == 401
    assert ApiKey.objects.get(ingest_run=run).revoked_at is not None
