"""Cancelling runs, end to end: the sandbox is killed within seconds and the run stays cancelled."""

import time

import pytest

from belvedir.models import ApiKey
from runs.executor import execute_run
from runs.services import run_finish, run_heartbeat
from tests.runs.helpers import Background, containers_of, wait_for, wait_running_and_ticking

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def test_cancelling_a_running_run_kills_its_sandbox_within_seconds(sandbox_settings, launch, owner):
    run = launch(env={"SLEEP": "60"})
    worker = Background(run.pk)
    wait_running_and_ticking(run.pk)
    assert [c.status for c in containers_of(run.pk)] == ["running"]

    asked = time.monotonic()
    response = owner.api.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"  # at once, not when the worker notices
    assert "belvedir: cancelled by request." in response.json()["notes"]

    wait_for(lambda: containers_of(run.pk) == [], 10, "the sandbox to be removed")
    assert worker.join(timeout=15) == "cancelled"
    assert time.monotonic() - asked < 15

    run.refresh_from_db()
    assert run.status == "cancelled" and run.score is None
    assert run.finished_at is not None and run.cancel_requested_at is not None
    assert "tick 0" in run.log_tail and "done" not in run.log_tail
    assert ApiKey.objects.get(ingest_run=run).revoked_at is not None
    # A late heartbeat or finish (from a worker that had not noticed) does not bring it back.
    assert run_heartbeat(run_id=run.pk, log_tail="late", log_size=4) is False
    assert run_finish(run_id=run.pk, status="succeeded", score=1.0) is False
    run.refresh_from_db()
    assert run.status == "cancelled" and run.score is None and run.log_tail != "late"


def test_a_cancelled_queued_run_never_executes(sandbox_settings, launch, owner):
    run = launch()
    response = owner.api.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"

    assert execute_run(run.pk) == "not claimed"
    run.refresh_from_db()
    assert run.status == "cancelled" and run.started_at is None and run.log_tail == ""
    assert containers_of(run.pk) == []
    assert ApiKey.objects.get(ingest_run=run).revoked_at is not None


def test_a_finished_run_cannot_be_cancelled(sandbox_settings, launch, owner):
    run = launch()
    assert execute_run(run.pk) == "succeeded"
    response = owner.api.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 400
    assert response.json() == {"status": ["The run has already succeeded."]}
    run.refresh_from_db()
    assert run.status == "succeeded" and run.score == pytest.approx(0.85)


def test_a_run_runs_only_once_even_if_executed_twice(sandbox_settings, launch):
    run = launch()
    assert execute_run(run.pk) == "succeeded"
    assert execute_run(run.pk) == "not claimed"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.log_tail.count("starting in") == 1
