"""Runs end to end, with the real Docker engine and the sandbox image."""

import pytest

from belvedir.models import ApiKey
from runs.executor import execute_run
from runs.models import Run

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def run_it(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def test_a_run_that_writes_a_score_succeeds_with_the_contract_env(
    sandbox_settings, launch, live_server
):
    run = run_it(
        launch(
            env={"HARNESS_OWN": "mine", "MODEL": "harness-default"},
            tasks='[{"id": "t1"}]',
            model="openai/gpt-4.1-mini",
            attempts=3,
            grading="pass@k",
        )
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == pytest.approx(0.85)
    seen = run.results["seen_env"]
    assert seen["BELVEDIR_RUN_ID"] == run.pk == seen["FRACTAL_RUN_ID"]
    assert seen["BELVEDIR_BASE_URL"] == live_server.url == seen["FRACTAL_BASE_URL"]
    # The run key reached the sandbox; echoed into results, it is redacted like every secret.
    assert seen["BELVEDIR_API_KEY"] == "[redacted]" == seen["FRACTAL_API_KEY"]
    assert seen["BELVEDIR_TASK_ATTEMPTS"] == "3" and seen["BELVEDIR_GRADING"] == "pass@k"
    assert seen["BELVEDIR_TASKS_FILE"] == seen["FRACTAL_TASKS_FILE"]
    assert run.results["tasks_preview"] == '[{"id": "t1"}]'
    assert seen["HARNESS_OWN"] == "mine"
    assert seen["MODEL"] == "openai/gpt-4.1-mini"  # the launch setting wins over the harness env
    assert run.results["model"] == "openai/gpt-4.1-mini"
    assert run.results["uid"] == 1000
    assert ApiKey.objects.get(run=run).revoked_at is not None
    assert "installing contract-harness" in run.log_tail
