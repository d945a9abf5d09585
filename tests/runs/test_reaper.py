"""The reaper, with a real worker process killed mid-run: no run stays "running" forever.

Other test sessions share this Docker engine, and reap() removes every managed sandbox that
has no running run *in this database*. So these tests hand reap() a backend that only lists
this test's own sandboxes; what reap() does with them is the real thing.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from belvedir.models import ApiKey
from belvedir.sandbox_config import get_backend, spec_from_settings
from runs import reaper
from runs.models import Run
from sandboxes.base import SandboxHandle
from tests.helpers.run_fixtures import worker_env
from tests.runs.helpers import (
    Background,
    containers_of,
    queue_entries,
    start_qcluster,
    stop_qcluster,
    subprocess_database_url,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


class OwnSandboxes:
    """The real backend, listing only the sandboxes of the given run ids."""

    def __init__(self, run_ids: set[str]):
        self.real = get_backend()
        self.run_ids = run_ids

    def list_by_label(self, label_filter=None):
        return [s for s in self.real.list_by_label(label_filter) if s.run_id in self.run_ids]

    def sweep_volumes(self):
        return []  # other sessions' volumes are theirs (tests/runs/test_sandbox_volumes.py)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.fixture
def own_sandboxes(monkeypatch):
    run_ids: set[str] = set()
    monkeypatch.setattr(reaper, "get_backend", lambda: OwnSandboxes(run_ids))
    yield run_ids
    backend = get_backend()
    for run_id in run_ids:  # whatever a failed test left behind
        for info in backend.list_by_label({"belvedir.run_id": run_id}):
            backend.remove(SandboxHandle(id=info.id, run_id=run_id))


def worker_process(run_id: str, settings) -> subprocess.Popen:
    """A separate OS process running execute_run, as a django-q2 worker would."""
    code = (
        "import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'belvedir.settings'); "
        "django.setup(); from runs.executor import execute_run; "
        f"execute_run({run_id!r})"
    )
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        **worker_env(settings),
    }
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_a_run_whose_worker_was_killed_is_failed_and_its_sandbox_removed(
    sandbox_settings, launch, own_sandboxes
):
    run = launch(env={"SLEEP": "60"})
    own_sandboxes.add(run.pk)
    worker = worker_process(run.pk, sandbox_settings)
    try:
        wait_for(
            lambda: (r := Run.objects.get(pk=run.pk)).status == "running" and "tick" in r.log_tail,
            30,
            "the worker process to start the run",
            on_timeout=lambda: worker.kill() or worker.stderr.read().decode()[-3000:],
        )
        assert [c.status for c in containers_of(run.pk)] == ["running"]
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(timeout=10) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for leftover in Path("/tmp").glob(f"belvedir-{run.pk}-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    # The sandbox outlives its worker; the run still says "running".
    assert [c.status for c in containers_of(run.pk)] == ["running"]
    assert reaper.reap()["failed"] == []  # the last heartbeat is still fresh
    # No one beats for it any more: its last heartbeat grows older than the stale limit.
    backdate_heartbeat(run, seconds=sandbox_settings.BELVEDIR_HEARTBEAT_STALE + 1)

    result = reaper.reap()
    assert result["failed"] == [run.pk] and result["removed"] == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.finished_at is not None
    note = run.notes[-1]
    assert note.startswith("belvedir: the worker running this run stopped responding")
    assert note in run.log_tail and "tick 0" in run.log_tail
    assert containers_of(run.pk) == []
    assert ApiKey.objects.get(ingest_run=run).revoked_at is not None

    assert reaper.reap() == {
        "failed": [],
        "requeued": [],
        "removed": 0,
        "released": [],
        "warm_removed": [],
        "gone_removed": [],
    }


def test_the_reaper_removes_orphan_sandboxes_and_leaves_healthy_runs_alone(
    sandbox_settings, launch, make_run, own_sandboxes
):
    sandbox_settings.BELVEDIR_HEARTBEAT_STALE = 5
    healthy = launch(env={"SLEEP": "4"})
    finished = make_run(status="failed")
    unknown = f"run_orphan{uuid.uuid4().hex[:10]}"
    own_sandboxes.update({healthy.pk, finished.pk, unknown})

    backend = get_backend()
    for run_id in (finished.pk, unknown):
        backend.launch(spec_from_settings(run_id=run_id, command=["sleep", "60"]))
    worker = Background(healthy.pk)
    wait_for(
        lambda: Run.objects.get(pk=healthy.pk).status == "running" and containers_of(healthy.pk),
        30,
        "the healthy run to be running in its sandbox",
    )

    result = reaper.reap()
    assert result["removed"] == 2 and result["failed"] == []
    assert containers_of(finished.pk) == [] and containers_of(unknown) == []
    assert len(containers_of(healthy.pk)) == 1

    assert worker.join() == "succeeded"
    healthy.refresh_from_db()
    assert healthy.status == "succeeded" and healthy.score == pytest.approx(0.85)


def test_a_queued_run_that_waited_too_long_is_enqueued_again(launch, settings):
    settings.BELVEDIR_QUEUED_STALE = 60
    stale = launch()
    fresh = launch()
    Run.objects.filter(pk=stale.pk).update(enqueued_at=timezone.now() - timedelta(minutes=2))
    OrmQ.objects.all().delete()

    result = reaper.reap()
    assert result["requeued"] == [stale.pk]
    (task,) = [q.task for q in OrmQ.objects.all()]
    assert task["func"] == "runs.jobs.execute_run" and tuple(task["args"]) == (stale.pk,)
    # Enqueued again just now: the next pass leaves it alone, so the queue does not grow.
    assert reaper.reap()["requeued"] == []
    assert OrmQ.objects.count() == 1
    fresh.refresh_from_db()
    assert fresh.status == "queued"


def test_queued_runs_waiting_behind_busy_workers_keep_their_place_and_one_queue_entry(
    own_sandboxes, owner, make_run, settings, tmp_path
):
    from django_q.tasks import async_task

    from runs import services

    settings.BELVEDIR_QUEUED_STALE = 5
    log = tmp_path / "runs.log"
    cluster = start_qcluster("runs", log, Q_WORKERS="1")
    try:
        async_task("time.sleep", 600, cluster="runs")  # the one run worker is taken
        wait_for(lambda: b"processing" in log.read_bytes(), 30, "the worker to be busy")
        now = timezone.now()
        first = make_run(status="queued", enqueued_at=now - timedelta(seconds=30))
        second = make_run(status="queued", enqueued_at=now - timedelta(seconds=20))
        for run in (first, second):
            services.run_enqueue(run_id=run.pk)
        wait_for(  # the cluster took a task off the broker for its busy worker: locked
            lambda: OrmQ.objects.filter(lock__gt=timezone.now()).exists(),
            30,
            "the cluster to hold a waiting task",
        )

        def places() -> list:
            return [
                owner.api.get(f"/api/v1/runs/{run.pk}").json()["queue_position"]
                for run in (first, second)
            ]

        assert places() == [1, 2]
        assert reaper.reap()["requeued"] == []
        assert reaper.reap()["requeued"] == []
        assert places() == [1, 2]
        assert [len(queue_entries(run.pk)) for run in (first, second)] == [1, 1]

        # The first run's task is lost (a crashed cluster held it): requeued, once, in place.
        OrmQ.objects.filter(pk=queue_entries(first.pk)[0].pk).delete()
        assert reaper.reap()["requeued"] == [first.pk]
        assert reaper.reap()["requeued"] == []
        assert [len(queue_entries(run.pk)) for run in (first, second)] == [1, 1]
        assert places() == [1, 2]
        first.refresh_from_db()
        assert first.enqueued_at == now - timedelta(seconds=30)
    finally:
        stop_qcluster(cluster)


def test_the_reaper_leaves_a_run_whose_worker_beats_again_before_the_update(launch, settings):
    from runs.services import run_claim, run_finish

    run = launch()
    assert run_claim(run_id=run.pk, worker="w:1")
    cutoff = timezone.now() - timedelta(seconds=30)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())  # it beat after the scan
    assert run_finish(run_id=run.pk, status="failed", heartbeat_before=cutoff) is False
    run.refresh_from_db()
    assert run.status == "running"
    assert run.ingest_key.revoked_at is None


def test_a_run_launched_without_a_model_records_the_harness_model(launch):
    run = launch(env={"MODEL": "org/harness-model"}, model_api_key="sk-own-key")
    assert run.model == "org/harness-model"


@pytest.mark.docker
def test_the_reaper_never_touches_another_platforms_sandboxes(db, settings):
    """Two platforms (or test sessions) on one engine: each reaps only its own sandboxes."""
    from sandboxes.docker import DockerBackend

    other = DockerBackend(
        instance="another-platform", data_dir=Path(settings.BELVEDIR_SANDBOX_DATA_DIR)
    )
    spec = spec_from_settings(
        run_id=f"run_other_{uuid.uuid4().hex[:8]}", command=["sleep", "30"], network="none"
    )
    handle = other.launch(spec)
    try:
        assert all(info.id != handle.id for info in get_backend().list_by_label())
        reaper.reap()
        assert [info.id for info in other.list_by_label()] == [handle.id]
    finally:
        other.kill(handle)
        other.remove(handle)


def test_a_slow_clone_keeps_beating_so_the_reaper_leaves_the_run_alone(
    sandbox_settings, launch, monkeypatch
):
    from runs import executor

    real_clone = executor.clone_repo
    cloning, cloned = threading.Event(), threading.Event()

    def slow_clone(*args, **kwargs):
        cloning.set()
        assert cloned.wait(30)  # the clone lasts until the test has reaped
        return real_clone(*args, **kwargs)

    monkeypatch.setattr(executor, "clone_repo", slow_clone)
    run = launch()
    worker = Background(run.pk)
    try:
        assert cloning.wait(10)
        # As if the clone had already taken longer than the stale limit...
        old = backdate_heartbeat(run, seconds=sandbox_settings.BELVEDIR_HEARTBEAT_STALE + 1)
        # ...the worker still beats while it clones,
        wait_for(lambda: Run.objects.get(pk=run.pk).heartbeat_at > old, 10, "a heartbeat")
        # so the reaper leaves the run alone.
        assert reaper.reap()["failed"] == []
        assert Run.objects.get(pk=run.pk).status == "running"
    finally:
        cloned.set()
    assert worker.join() == "succeeded"


def test_a_run_reaped_while_its_worker_was_still_cloning_is_never_started(
    sandbox_settings, launch, monkeypatch
):
    from runs import executor

    real_clone = executor.clone_repo
    cloning, cancelled = threading.Event(), threading.Event()

    def clone_then_wait(*args, **kwargs):
        cloning.set()
        assert cancelled.wait(30)  # the run is cancelled while its repo is being cloned
        return real_clone(*args, **kwargs)

    monkeypatch.setattr(executor, "clone_repo", clone_then_wait)
    run = launch()
    worker = Background(run.pk)
    assert cloning.wait(10)
    try:
        assert owner_cancel(run) == "cancelled"
    finally:
        cancelled.set()
    assert worker.join() == "cancelled"
    assert containers_of(run.pk) == []
    run.refresh_from_db()
    assert run.status == "cancelled" and "installing" not in run.log_tail


def backdate_heartbeat(run, *, seconds: float):
    """Set the run's last heartbeat `seconds` ago (instead of waiting that long); that time."""
    then = timezone.now() - timedelta(seconds=seconds)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=then)
    return then


def owner_cancel(run) -> str:
    from runs.services import run_cancel

    return run_cancel(run=run).status
