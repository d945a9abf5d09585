"""A real django-q2 cluster picks up a launched run within seconds and runs it to the end."""

import os
import time
from pathlib import Path

import pytest

from runs.models import Run
from tests.helpers.engines import ENGINE_A, containers_on
from tests.runs.helpers import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


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
    # The worker removes the sandbox after it has saved the run's end.
    wait_for(lambda: not containers_on(ENGINE_A, run_id), 30, "the worker to remove the sandbox")
