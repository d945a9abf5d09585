"""Task sandboxes asked for from inside a real run's sandbox (gVisor, the isolated network,
through the sandbox gateway, with the run's key), as the Harbor driver will: a run that ends
leaves none, a cancel removes them within seconds, a killed worker's are reaped.

The run's harness is a small loop (below) standing in for Harbor; the run is made a managed
Harbor run by its snapshot's card (the harness itself cannot be: the managed rules keep the
driver's own commands), which is what the API checks.
"""

import os
import shutil
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from billing.models import Kind
from billing.services import ledger_operator_entry
from harbor.models import TaskSandbox
from runs import reaper
from runs.models import Run, Status
from tests.helpers.run_fixtures import worker_env
from tests.helpers.task_sandboxes import loop_repo_at, remove_task_images, task_containers
from tests.runs.helpers import Background, subprocess_database_url, wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def loop_repo(tmp_path, transactional_db):
    """The harness repo: the loop and a task environment of its own."""
    yield loop_repo_at(tmp_path / "loop")
    client_tags = {b.image for b in TaskSandbox.objects.exclude(image="")}
    remove_task_images(client_tags)


@pytest.fixture
def launch_loop(
    owner, make_harness, loop_repo, sandbox_settings, django_capture_on_commit_callbacks
):
    from runs.services import run_launch

    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=5_000_000, note="tests"
    )

    def launch(**env) -> Run:
        harness = make_harness(
            name="loop",
            repo_url=loop_repo,
            install_command="true",
            run_command="python3 run.py",
            env=env,
        )
        with django_capture_on_commit_callbacks(execute=False):
            run = run_launch(project=owner.project, harness=harness, created_by=owner.user)
        snapshot = {**run.harness_snapshot, "preset": "harbor-runner"}  # a managed Harbor run
        Run.objects.filter(pk=run.pk).update(harness_snapshot=snapshot)
        return run

    return launch


def log_of(run: Run) -> str:
    return Run.objects.get(pk=run.pk).log_tail


def test_a_runs_sandbox_builds_execs_and_stops_task_sandboxes_through_the_gateway(launch_loop):
    run = launch_loop(TASKS="2", FINISH="1")

    assert Background(run.pk).join(180) == Status.SUCCEEDED, log_of(run)

    run.refresh_from_db()
    assert run.log_tail.count("create 201") == 2 and run.log_tail.count("stop 200") == 2
    assert '{"stream": "stdout", "data": "hello from task bash in /app\\n"}' in run.log_tail
    assert '{"exit_code": 0, "timed_out": false}' in run.log_tail
    made = run.results["task_sandboxes"]
    assert set(TaskSandbox.objects.filter(run=run).values_list("pk", "status")) == {
        (made[0], "stopped"),
        (made[1], "stopped"),
    }
    assert TaskSandbox.objects.get(pk=made[1]).cached  # the second reused the first's image
    assert task_containers(run.pk) == []


def test_cancelling_a_run_mid_way_removes_every_task_sandbox_within_seconds(owner, launch_loop):
    run = launch_loop(TASKS="2")
    worker = Background(run.pk)
    wait_for(
        lambda: "tick" in log_of(run),
        120,
        "the run to start two task sandboxes",
        on_timeout=lambda: log_of(run),
    )
    assert [c.status for c in task_containers(run.pk)] == ["running", "running"]

    assert owner.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200

    wait_for(lambda: task_containers(run.pk) == [], 10, "every task sandbox to be removed")
    assert worker.join(60) == Status.CANCELLED
    assert not TaskSandbox.objects.filter(run=run, status__in=TaskSandbox.ALIVE).exists()


def test_a_killed_workers_task_sandboxes_are_reaped(launch_loop, sandbox_settings):
    run = launch_loop(TASKS="2")
    code = (
        "import django; django.setup(); from runs.executor import execute_run; "
        f"execute_run({run.pk!r})"
    )
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        **worker_env(sandbox_settings),
    }
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env)
    try:
        wait_for(
            lambda: "tick" in log_of(run),
            120,
            "the run to start two task sandboxes",
            on_timeout=lambda: log_of(run),
        )
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for leftover in Path("/tmp").glob(f"belvedir-{run.pk}-*"):  # the killed worker's
            shutil.rmtree(leftover, ignore_errors=True)
    assert len(task_containers(run.pk)) == 2  # they outlive the worker, for now
    stale = timezone.now() - timedelta(seconds=sandbox_settings.BELVEDIR_HEARTBEAT_STALE + 1)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)

    assert reaper.reap()["failed"] == [run.pk]

    assert task_containers(run.pk) == []
    assert not TaskSandbox.objects.filter(run=run, status__in=TaskSandbox.ALIVE).exists()
    assert Run.objects.get(pk=run.pk).status == Status.FAILED
