"""How a run reads on its page (runs.display): log tail, stages, banner, results, configuration."""

from datetime import timedelta

import pytest
from django.utils import timezone

from belvedir import crypto
from harnesses import env_secrets
from runs import display
from runs.models import Run
from runs.results import TASK_KEYS, task_results


def run_of(**fields) -> Run:
    return Run(harness_name="contract", **fields)


# --- the log ------------------------------------------------------------------------------------


def test_a_whole_log_shows_as_it_is_without_a_note():
    view = display.log_view(run_of(log_tail="one\ntwo\n", log_size=8))
    assert (view.text, view.truncated, view.note) == ("one\ntwo\n", False, "")


def test_a_tail_that_starts_mid_stream_starts_at_a_line_and_says_it_was_truncated():
    tail = "ne 41\nline 42\nline 43\n"
    view = display.log_view(run_of(log_tail=tail, log_size=100_000))
    assert view.truncated is True
    assert view.text == "line 42\nline 43\n"
    assert view.note == "… earlier output truncated, showing the last 16 KB"


def test_a_truncated_tail_of_one_long_line_is_kept_whole():
    view = display.log_view(run_of(log_tail="x" * 50, log_size=10_000))
    assert view.truncated is True and view.text == "x" * 50


# --- the stages ---------------------------------------------------------------------------------


def test_a_running_run_shows_stages_done_the_current_one_with_its_time_and_those_to_come():
    now = timezone.now()
    run = run_of(status="running", stage="installing", stage_started_at=now - timedelta(seconds=7))
    steps = display.stages(run, now=now)
    assert [(s.stage, s.state) for s in steps] == [
        ("cloning", "done"),
        ("installing", "current"),
        ("running", "todo"),
        ("collecting", "todo"),
    ]
    assert steps[1].elapsed == timedelta(seconds=7) and steps[0].elapsed is None


def test_a_failed_run_shows_the_stage_it_stopped_in_and_a_succeeded_one_all_done():
    now = timezone.now()
    failed = display.stages(run_of(status="failed", stage="installing"), now=now)
    assert [s.state for s in failed] == ["done", "stopped", "todo", "todo"]
    succeeded = display.stages(run_of(status="succeeded", stage="collecting"), now=now)
    assert [s.state for s in succeeded] == ["done"] * 4


def test_a_queued_run_has_every_stage_still_to_come_and_no_elapsed_time():
    now = timezone.now()
    run = run_of(status="queued")
    assert [s.state for s in display.stages(run, now=now)] == ["todo"] * 4
    assert display.elapsed(run, now=now) is None


def test_elapsed_runs_to_now_while_running_and_to_the_finish_once_ended():
    now = timezone.now()
    start = now - timedelta(seconds=90)
    assert display.elapsed(run_of(started_at=start), now=now) == timedelta(seconds=90)
    ended = run_of(started_at=start, finished_at=start + timedelta(seconds=30))
    assert display.elapsed(ended, now=now) == timedelta(seconds=30)


# --- notes --------------------------------------------------------------------------------------


def test_a_failed_runs_banner_holds_its_belvedir_notes_and_the_rest_stay_notes():
    run = run_of(
        status="failed",
        notes=["belvedir: the install command exited with code 3.", "harness said hi"],
    )
    assert display.failure_notes(run) == ["belvedir: the install command exited with code 3."]
    assert display.other_notes(run) == ["harness said hi"]


def test_a_failed_run_without_notes_still_says_how_it_ended_and_a_succeeded_one_has_no_banner():
    assert display.failure_notes(run_of(status="failed", exit_code=2)) == [
        "The run ended with exit code 2."
    ]
    succeeded = run_of(status="succeeded", notes=["belvedir: score 85 read as a percentage: 0.85."])
    assert display.failure_notes(succeeded) == []
    assert display.other_notes(succeeded) == succeeded.notes


# --- results ------------------------------------------------------------------------------------


def test_results_show_the_runs_score_per_task_rows_and_the_other_keys():
    results = {
        "score": 0.5,
        "tasks": [{"id": "t1", "passed": True, "reward": 1.0}, {"id": "t2", "passed": False}],
        "passed": 1,
        "config": {"k": 3},
    }
    view = display.results_view(run_of(status="succeeded", score=0.5, results=results))
    assert view.score == 0.5 and view.reported_score == ""
    assert view.tasks.key == "tasks" and view.tasks.total == 2
    assert view.tasks.columns == ["id", "passed", "reward"]
    assert view.tasks.rows == [["t1", "✓", "1"], ["t2", "✗", "—"]]
    assert view.other == [("passed", "1"), ("config", '{"k": 3}')]
    assert '"config"' in view.raw


def test_per_task_detail_keyed_by_task_name_becomes_rows_named_by_task():
    results = {"score": 1, "per_task": {"a": {"reward": 1}, "b": {"reward": 0, "why": "wrong"}}}
    tasks = display.results_view(run_of(status="succeeded", score=1.0, results=results)).tasks
    assert tasks.columns == ["task", "reward", "why"]
    assert tasks.rows == [["a", "1", "—"], ["b", "0", "wrong"]]
    flat = display.task_table("per_task", {"a": 1, "b": 0.25})
    assert (flat.columns, flat.rows) == (["task", "result"], [["a", "1"], ["b", "0.25"]])


@pytest.mark.parametrize("key", TASK_KEYS)
def test_the_page_shows_per_task_detail_under_every_key_the_scores_read(key):
    """One list of keys for the page and for what scores read (runs.results.TASK_KEYS)."""
    document = {"score": 0.5, key: {"a": 1.0, "b": 0.0}, "other": 1}
    view = display.results_view(run_of(status="succeeded", score=0.5, results=document))
    assert view.tasks.key == key and view.tasks.rows == [["a", "1"], ["b", "0"]]
    assert task_results(document) == {"a": 1.0, "b": 0.0}
    assert [name for name, _ in view.other] == ["other"]


def test_a_failed_run_never_shows_the_harness_score_as_its_score():
    view = display.results_view(run_of(status="failed", score=None, results={"score": 0.85}))
    assert view.score is None
    assert view.reported_score == "0.85"
    assert "not counted because the run failed" in view.reported_note


def test_a_percentage_score_shows_the_runs_score_and_what_the_harness_wrote():
    view = display.results_view(run_of(status="succeeded", score=0.85, results={"score": 85}))
    assert view.score == 0.85 and view.reported_score == "85"


def test_no_results_means_no_results_section():
    assert display.results_view(run_of(status="failed", results=None)) is None


# --- the harness configuration -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_configuration_shows_the_snapshot_with_secret_env_values_masked(harness):
    run = run_of(
        harness=harness,
        harness_snapshot={"name": "Smoke", "run_command": "python run.py", "env": {"A": "1"}},
        harness_env_secrets_encrypted=env_secrets.secrets_encrypt({"OPENAI_API_KEY": "sk-hidden"}),
    )
    config = dict(display.harness_config(run))
    assert config["name"] == "Smoke" and config["run_command"] == "python run.py"
    assert config["env"] == f"A=1\nOPENAI_API_KEY={env_secrets.MASK}"
    assert "sk-hidden" not in str(config)
    assert crypto.decrypt(run.harness_env_secrets_encrypted)  # the secret is still stored


@pytest.mark.django_db
def test_the_page_says_when_the_harness_changed_after_the_run(harness):
    from harnesses.services import FIELDS, harness_update

    run = run_of(
        harness=harness,
        harness_snapshot={f: getattr(harness, f) for f in FIELDS},
        harness_env_secrets_encrypted=harness.env_secrets_encrypted,
    )
    assert display.harness_changed_since(run) is False
    harness_update(harness=harness, run_command="python other.py")
    assert display.harness_changed_since(run) is True


# A Belvedir Runner's results.json (drivers/belvedir-runner): each task with its attempts.
RUNNER_RESULTS = {
    "score": 0.5,
    "tasks": [
        {
            "id": "capital",
            "kind": "exact",
            "score": 1.0,
            "passed": 1,
            "attempts": [
                {"attempt": 1, "score": 0.0, "passed": False, "error": "the judge timed out"},
                {"attempt": 2, "score": 1.0, "passed": True, "answer": "Paris " * 100},
            ],
        },
        {"id": "sum", "kind": "exact", "score": 0.0, "passed": 0, "attempts": []},
    ],
}


def test_a_tasks_attempts_show_as_a_small_table_not_as_json():
    tasks = display.results_view(
        run_of(status="succeeded", score=0.5, results=RUNNER_RESULTS)
    ).tasks
    assert tasks.columns == ["id", "kind", "score", "passed", "attempts"]
    attempts = tasks.rows[0][4]
    assert isinstance(attempts, display.NestedTable)
    assert attempts.columns == ["attempt", "score", "passed", "error", "answer"]
    assert attempts.rows[0] == ["1", "0", "✗", "the judge timed out", "—"]
    assert attempts.rows[1][:3] == ["2", "1", "✓"]
    assert len(attempts.rows[1][4]) == display.NESTED_CELL_CHARS  # a long answer is clipped
    assert attempts.rows[1][4].endswith("…")
    assert tasks.rows[1][4] == "—"  # no attempts


@pytest.mark.django_db
def test_the_run_page_shows_each_tasks_attempts_as_a_table_in_its_row(owner, harness):
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        status="succeeded",
        score=0.5,
        results=RUNNER_RESULTS,
    )
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    table = page[page.index('id="results-tasks"') : page.index("</table>\n    </div>")]
    assert '<table class="nested">' in table
    assert "<th>attempt</th>" in table and "<td>the judge timed out</td>" in table
    assert "&quot;attempt&quot;" not in table and '"attempt":' not in table  # no raw JSON


@pytest.mark.django_db
def test_columns_keep_a_readable_order_after_the_results_went_through_jsonb(owner, harness):
    run = Run.objects.create(
        project=owner.project, harness=harness, status="succeeded", results=RUNNER_RESULTS
    )
    run.refresh_from_db()  # jsonb orders keys by length: "passed" before "attempt"
    tasks = display.results_view(run).tasks
    assert tasks.columns == ["id", "kind", "score", "passed", "attempts"]
    assert tasks.rows[0][4].columns == ["attempt", "score", "passed", "error", "answer"]
