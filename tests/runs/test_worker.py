"""A real django-q2 cluster picks up a launched run within seconds and runs it to the end."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.models import Run
from tests.runs.conftest import subprocess_database_url, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(live_server, tmp_path):
    """`manage.py qcluster` on this test's database (the ORM broker), stopped afterwards."""
    log = tmp_path / "qcluster.log"
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "Q_WORKERS": "1",
        "Q_CLUSTER_NAME": "runs",
        "BELVEDIR_SANDBOX_BASE_URL": live_server.url,
        "BELVEDIR_SANDBOX_NETWORK": "host",
        "BELVEDIR_SANDBOX_MEMORY": "1g",
        "BELVEDIR_SANDBOX_CPUS": "1",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers share its process group
        )
    try:
        wait_for(
            lambda: process.poll() is not None or b"running." in log.read_bytes(),
            30,
            "the cluster to start",
        )
        assert process.poll() is None, log.read_text()
        yield log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        try:
            os.killpg(process.pid, signal.SIGKILL)  # any worker left behind
        except ProcessLookupError:
            pass


def test_a_launched_run_is_picked_up_by_a_worker_within_seconds(
    sandbox_settings, cluster, owner, make_harness
):
    harness = make_harness(env={"SLEEP": "1"})
    launched = time.monotonic()
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]

    wait_for(lambda: Run.objects.get(pk=run_id).status != "queued", 5, "a worker to claim the run")
    assert time.monotonic() - launched < 5
    run = wait_for(
        lambda: (r := Run.objects.get(pk=run_id)).is_terminal and r, 60, "the run to finish"
    )
    assert run.status == "succeeded", (run.notes, run.log_tail, cluster.read_text()[-2000:])
    assert run.score == pytest.approx(0.85)
    assert run.worker and run.worker.split(":")[-1] != str(os.getpid())  # another process ran it
