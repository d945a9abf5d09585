"""`belvedir runs launch/list/watch/cancel` against a live server, with runs in real sandboxes."""

import re
import threading

import pytest
from django.db import connection

from runs.executor import execute_run
from runs.models import Run
from tests.runs.helpers import Background, containers_of, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def launched_id(out: str) -> str:
    match = re.search(r"launched (run_\w+)", out)
    assert match, out
    return match.group(1)


def worker_for_next_run() -> threading.Thread:
    """A stand-in worker: executes the first run that appears."""

    def work():
        try:
            run_id = wait_for(
                lambda: Run.objects.values_list("pk", flat=True).first(), 30, "a launched run"
            )
            execute_run(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_runs_launch_watch_follows_the_log_and_exits_0_when_the_run_succeeds(
    sandbox_settings, cli, make_harness
):
    harness = make_harness(env={"SLEEP": "2"})
    worker = worker_for_next_run()
    code, out, err = cli(
        "runs",
        "launch",
        harness.pk,
        "--model",
        "acme/model-1",
        "--model-api-key",
        "sk-own-key",  # acme/model-1 is not a model the platform covers
        "--watch",
        "--interval",
        "0.2",
    )
    worker.join(30)
    assert code == 0, (out, err)
    run_id = launched_id(out)
    assert "installing contract-harness" in out and "tick 1" in out and "done" in out
    assert out.count("starting in") == 1  # each piece of the log printed once
    assert f"{run_id} succeeded score=0.850" in out

    code, out, _ = cli("runs", "list")
    assert code == 0 and re.search(rf"{run_id}\s+succeeded\s+score=0.850", out)
    code, out, _ = cli("runs", "list", "--status", "failed")
    assert code == 0 and run_id not in out


def test_runs_watch_exits_non_zero_when_the_run_fails(sandbox_settings, cli, make_harness):
    harness = make_harness(env={"EXIT_CODE": "3"})
    code, out, _ = cli("runs", "launch", harness.pk)
    assert code == 0
    run_id = launched_id(out)
    worker = Background(run_id)
    code, out, _ = cli("runs", "watch", run_id, "--interval", "0.2")
    assert worker.join() == "failed"
    assert code == 1
    assert "done" in out  # the harness's own output
    assert f"{run_id} failed score=—" in out
    assert "belvedir: the run command exited with code 3." in out


def test_runs_cancel_stops_a_running_run(sandbox_settings, cli, make_harness):
    harness = make_harness(env={"SLEEP": "60"})
    code, out, _ = cli("runs", "launch", harness.pk)
    run_id = launched_id(out)
    worker = Background(run_id)
    wait_for(lambda: "tick" in Run.objects.get(pk=run_id).log_tail, 30, "the run to tick")

    code, out, _ = cli("runs", "cancel", run_id)
    assert code == 0 and out.strip() == f"{run_id}  cancelled"
    assert worker.join(timeout=15) == "cancelled"
    assert containers_of(run_id) == []
    code, out, _ = cli("runs", "watch", run_id, "--interval", "0.2")
    assert code == 1 and f"{run_id} cancelled" in out

    code, _, err = cli("runs", "cancel", run_id)
    assert code == 1 and "The run has already cancelled." in err


def test_a_refused_launch_prints_why_and_exits_non_zero(sandbox_settings, cli, make_harness):
    broken = make_harness(name="broken", repo_url="file:///nonexistent")
    code, out, err = cli("runs", "launch", broken.pk)
    assert code == 1 and out == ""
    assert "HTTP 400" in err and "does not appear to be a git repository" in err
    code, _, err = cli("runs", "launch", "har_nope")
    assert code == 1 and "harness: No such harness in this project." in err
    assert not Run.objects.exists()
