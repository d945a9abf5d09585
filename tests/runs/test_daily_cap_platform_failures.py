"""The 24-hour launch cap counts the runs a user got, not the ones the platform failed.

Each platform failure is produced for real: the reaper failing a run whose worker stopped
responding, a launch on a worker whose disk is too full for one more sandbox, a sandbox whose
image the engine does not have. A harness whose install fails is the user's, and counts.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from belvedir.errors import LimitReached
from runs import reaper, services
from runs.executor import execute_run
from runs.models import Run
from tests.runs.helpers import containers_of
from tests.runs.test_reaper import own_sandboxes  # noqa: F401 - the reaper's own-sandboxes view

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def one_a_day(sandbox_settings):
    sandbox_settings.BELVEDIR_RUNS_PER_DAY_CAP = 1
    return sandbox_settings


def run_it(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    assert containers_of(run.pk) == []
    return run


def launch_again(owner) -> Run:
    harness = Run.objects.latest("created_at").harness
    return services.run_launch(project=owner.project, harness=harness, created_by=owner.user)


@pytest.mark.usefixtures("own_sandboxes")
def test_a_run_the_reaper_failed_as_lost_does_not_count_toward_the_daily_cap(
    one_a_day, owner, launch
):
    run = launch()
    stale = timezone.now() - timedelta(seconds=one_a_day.BELVEDIR_HEARTBEAT_STALE + 1)
    Run.objects.filter(pk=run.pk).update(status="running", heartbeat_at=stale)

    assert reaper.reap()["failed"] == [run.pk]
    assert launch_again(owner).status == "queued"
    run.refresh_from_db()
    assert run.status == "failed" and run.platform_failed


def test_a_launch_failed_because_the_workers_disk_was_too_full_does_not_count(
    one_a_day, owner, launch
):
    launched = launch()
    one_a_day.BELVEDIR_SANDBOX_DISK = 2**50  # a sandbox's quota no worker's disk has room for
    run = run_it(launched)
    assert any("too full to start a sandbox" in note for note in run.notes), run.notes
    assert launch_again(owner).status == "queued"
    assert run.status == "failed" and run.platform_failed


def test_a_sandbox_that_never_started_does_not_count(one_a_day, owner, launch):
    one_a_day.BELVEDIR_SANDBOX_IMAGE = "belvedir-no-such-image:never-built"
    run = run_it(launch())
    assert run.container_id == "" and "No such image" in run.notes[0], run.notes
    assert launch_again(owner).status == "queued"
    assert run.status == "failed" and run.platform_failed


def test_a_harness_whose_install_failed_counts_and_the_refusal_says_what_it_counted(
    one_a_day, owner, launch
):
    run = run_it(launch(env={"INSTALL_FAIL": "1"}))
    assert run.status == "failed"
    assert "belvedir: the install command exited with code 3." in run.notes

    with pytest.raises(LimitReached) as refused:
        launch_again(owner)
    assert refused.value.code == "cap_daily"
    assert refused.value.message == (
        "Your organization launched 1 run in the last 24 hours "
        "(the limit is 1; runs the platform failed are not counted); try again later."
    )
