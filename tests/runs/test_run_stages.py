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


# --- the worker's side ---------------------------------------------------------------------------


def test_the_log_tail_notices_the_run_command_starting_even_split_across_chunks():
    from runs.contract import RUN_STAGE_LINE
    from runs.logtail import LogTail

    tail = LogTail([])
    tail.write("installing\nbelvedir: starting the ")
    assert tail.run_started is False
    tail.write("run command\nrun 1 starting\n")
    assert tail.run_started is True and RUN_STAGE_LINE in tail.text()


def test_the_run_line_counts_only_as_a_whole_line():
    from runs.logtail import LogTail

    tail = LogTail([])
    tail.write("echo belvedir: starting the run command\n")
    tail.write("belvedir: starting the run command, not really\n")
    assert tail.run_started is False
    first = LogTail([])
    first.write("belvedir: starting the run command\n")  # the very first line counts
    assert first.run_started is True


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_run_goes_through_its_stages_and_ends_in_the_one_it_reached(sandbox_settings, launch):
    from tests.runs.helpers import Background, wait_for

    run = launch(env={"SLEEP": "3"})
    worker = Background(run.pk)
    seen = set()

    def running():
        seen.add(Run.objects.get(pk=run.pk).stage)
        return "running" in seen

    wait_for(running, 60, "the running stage", every=0.05)
    assert worker.join() == "succeeded"
    run.refresh_from_db()
    assert run.stage == "collecting" and run.stage_started_at <= run.finished_at
    assert {"running"} <= seen <= {"", "cloning", "installing", "running", "collecting"}

    failed = launch(env={"INSTALL_FAIL": "1"})
    assert Background(failed.pk).join() == "failed"
    failed.refresh_from_db()
    assert failed.stage == "installing"

    exited = launch(env={"SCORE": "0.5"}, harness={"run_command": "python3 run.py; exit 2"})
    assert Background(exited.pk).join() == "failed"
    exited.refresh_from_db()
    assert exited.stage == "running"
