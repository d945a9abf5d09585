"""A run's stages: claimed into cloning, moved forward by the worker, never backward."""

import pytest

from runs import services
from runs.models import Run

pytestmark = pytest.mark.django_db


def test_claiming_a_run_puts_it_in_the_cloning_stage_from_its_start(make_run):
    run = make_run(status="queued")
    assert services.run_claim(run_id=run.pk, worker="w1")
    run.refresh_from_db()
    assert run.stage == "cloning" and run.stage_started_at == run.started_at


def test_stages_move_forward_with_the_time_each_began(make_run):
    run = make_run(status="queued")
    services.run_claim(run_id=run.pk, worker="w1")
    assert services.run_stage_advance(run_id=run.pk, stage="installing")
    installing = Run.objects.get(pk=run.pk)
    assert services.run_stage_advance(run_id=run.pk, stage="running")
    running = Run.objects.get(pk=run.pk)
    assert (installing.stage, running.stage) == ("installing", "running")
    assert running.stage_started_at > installing.stage_started_at > installing.started_at


def test_a_late_report_of_an_earlier_stage_changes_nothing(make_run):
    run = make_run(status="queued")
    services.run_claim(run_id=run.pk, worker="w1")
    services.run_stage_advance(run_id=run.pk, stage="running")
    before = Run.objects.get(pk=run.pk)
    assert not services.run_stage_advance(run_id=run.pk, stage="installing")
    assert not services.run_stage_advance(run_id=run.pk, stage="running")
    after = Run.objects.get(pk=run.pk)
    assert (after.stage, after.stage_started_at) == ("running", before.stage_started_at)


def test_a_run_that_ended_keeps_the_stage_it_reached(make_run):
    run = make_run(status="queued")
    services.run_claim(run_id=run.pk, worker="w1")
    services.run_cancel(run=run)
    assert not services.run_stage_advance(run_id=run.pk, stage="installing")
    run.refresh_from_db()
    assert (run.status, run.stage) == ("cancelled", "cloning")
