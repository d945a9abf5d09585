"""A run whose sandbox finds no room on the worker's disk (every sandbox's quota volume is
promised in full, sandboxes/diskquota.py check_room) waits for other sandboxes to end and give
theirs back, saying so in its log, instead of failing beside a disk that is about to have room:
a new user's `make up` starts four runs at once, each promised BELVEDIR_SANDBOX_DISK (10 GiB),
on a host whose free disk swings. The wait is bounded (BELVEDIR_DISK_ROOM_WAIT), after which
the run fails naming the disk, and a cancel ends it."""

import dataclasses
import uuid

import pytest

from belvedir.sandbox_config import get_backend, warm_template
from runs.executor import execute_run
from runs.models import Run
from sandboxes import diskquota
from sandboxes.base import tar_files
from tests.runs.helpers import Background, containers_of, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

FULL = "the worker's disk is too full to start a sandbox"


@pytest.fixture
def room_for_one(own_data_dir, sandbox_settings):
    """The disk's reserve set so that one more volume fits and a second does not: volumes
    large enough that what other work on the host writes meanwhile (the free disk is the
    host's) stays well inside the half volume of room left (they are sparse)."""
    sandbox_settings.BELVEDIR_SANDBOX_DISK = 20 * 2**30
    sandbox_settings.BELVEDIR_SANDBOX_SPARE_VOLUMES = 0  # every volume made under check_room
    size = sandbox_settings.BELVEDIR_SANDBOX_DISK
    free = diskquota.free_disk_bytes(own_data_dir)
    promised = diskquota.committed_bytes(root=own_data_dir)
    sandbox_settings.BELVEDIR_MIN_FREE_DISK = free - promised - size * 3 // 2
    return sandbox_settings


@pytest.fixture
def holder(room_for_one):
    """A sandbox holding the one volume there is room for, until the test removes it."""
    backend = get_backend()
    spec = dataclasses.replace(
        warm_template(),
        run_id=f"run_hold{uuid.uuid4().hex[:6]}",
        command=["sleep", "600"],
        workspace=tar_files({"a.txt": b"a"}),
    )
    handle = backend.launch(spec)
    held = [handle]
    yield lambda: held and backend.remove(held.pop())
    if held:
        backend.remove(held.pop())


def test_a_run_that_finds_no_room_waits_and_starts_once_another_sandbox_gives_its_back(
    holder, room_for_one, launch
):
    room_for_one.BELVEDIR_DISK_ROOM_WAIT = 120
    run = launch()
    worker = Background(run.pk)
    try:
        wait_for(
            lambda: "waits up to 120 s" in Run.objects.get(pk=run.pk).log_tail,
            30,
            "the run to say it waits for room",
        )
        assert containers_of(run.pk) == []
        assert Run.objects.get(pk=run.pk).status == "running"
    finally:
        holder()

    assert worker.join(timeout=120) == "succeeded"
    run.refresh_from_db()
    assert run.score == pytest.approx(0.85)
    assert FULL in run.log_tail and "BELVEDIR_DISK_ROOM_WAIT" in run.log_tail
    assert containers_of(run.pk) == []


def test_with_no_wait_a_run_that_finds_no_room_fails_at_once_naming_the_disk(
    holder, room_for_one, launch
):
    room_for_one.BELVEDIR_DISK_ROOM_WAIT = 0
    run = launch()

    assert execute_run(run.pk) == "failed"

    run.refresh_from_db()
    assert any(FULL in note for note in run.notes), run.notes
    assert "waits up to" not in run.log_tail
    assert containers_of(run.pk) == []


def test_a_run_cancelled_while_it_waits_for_room_ends_cancelled_without_a_sandbox(
    holder, room_for_one, launch, owner
):
    room_for_one.BELVEDIR_DISK_ROOM_WAIT = 120
    run = launch()
    worker = Background(run.pk)
    wait_for(lambda: "waits up to" in Run.objects.get(pk=run.pk).log_tail, 30, "the run to wait")

    assert owner.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200

    assert worker.join(timeout=30) == "cancelled"
    run.refresh_from_db()
    assert run.status == "cancelled" and run.score is None
    assert containers_of(run.pk) == []
