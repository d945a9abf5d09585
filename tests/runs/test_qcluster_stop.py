"""`manage.py qcluster` stops on SIGTERM: at once when idle, after the work in flight otherwise
(or at a second SIGTERM, or after Q_STOP_GRACE), and leaves none of its processes behind; a run
it stopped mid-way is failed by the reaper. Bounds here are generous ("it exits"), not speed
targets (bench/qcluster_stop.py has the 10 s one)."""

import os
import signal
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.tasks import async_task

from runs import reaper, services
from runs.management.commands.qcluster import descendants
from runs.models import Run
from tests.helpers.run_fixtures import worker_env
from tests.runs.helpers import (
    containers_of,
    process_group_alive,
    start_qcluster,
    stop_qcluster,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True)]
GENEROUS = 60  # seconds: "it exits", not how fast


def _busy(log) -> bool:
    return b"processing" in log.read_bytes()


def _exits(cluster, log) -> None:
    try:
        cluster.wait(timeout=GENEROUS)
    except Exception:
        pytest.fail(f"qcluster did not exit after SIGTERM:\n{log.read_text()}")


@pytest.fixture
def cluster_of(tmp_path):
    started = []

    def start(**env):
        log = tmp_path / f"cluster-{len(started)}.log"
        cluster = start_qcluster("runs", log, **env)
        started.append(cluster)
        return cluster, log

    yield start
    for cluster in started:
        if process_group_alive(cluster.pid):
            stop_qcluster(cluster, grace=1)


def test_an_idle_cluster_exits_on_one_sigterm_and_leaves_no_process(cluster_of):
    cluster, log = cluster_of(Q_WORKERS="2")
    workers = descendants(cluster.pid)
    assert len(workers) >= 3  # the sentinel, its workers, pusher and monitor
    os.kill(cluster.pid, signal.SIGTERM)
    _exits(cluster, log)
    assert cluster.returncode == 0, log.read_text()
    assert not process_group_alive(cluster.pid), "a process outlived its cluster"
    assert not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in workers)


def _alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_work_in_flight_is_let_finish_and_a_second_sigterm_stops_it_now(cluster_of):
    cluster, log = cluster_of(Q_WORKERS="1")
    async_task("time.sleep", 600, cluster="runs")
    wait_for(lambda: _busy(log), 30, "the worker to be busy", on_timeout=log.read_text)
    os.kill(cluster.pid, signal.SIGTERM)
    wait_for(lambda: b"stopping" in log.read_bytes(), 30, "the stop to begin")
    # The 600 s task is still running: the cluster waits for it rather than killing it.
    assert cluster.poll() is None and process_group_alive(cluster.pid)
    os.kill(cluster.pid, signal.SIGTERM)
    _exits(cluster, log)
    assert b"stopping now" in log.read_bytes()
    assert not process_group_alive(cluster.pid), "a worker outlived its cluster"


def test_q_stop_grace_bounds_the_wait_for_work_in_flight(cluster_of):
    cluster, log = cluster_of(Q_WORKERS="1", Q_STOP_GRACE="2")
    async_task("time.sleep", 600, cluster="runs")
    wait_for(lambda: _busy(log), 30, "the worker to be busy", on_timeout=log.read_text)
    os.kill(cluster.pid, signal.SIGTERM)
    _exits(cluster, log)
    assert not process_group_alive(cluster.pid), "a worker outlived its cluster"


def test_a_sigterm_to_the_whole_process_group_ends_it_without_a_sigkill(cluster_of):
    """What scripts/up.sh and container runtimes do: every process gets the SIGTERM."""
    cluster, log = cluster_of(Q_WORKERS="2")
    async_task("time.sleep", 600, cluster="runs")
    wait_for(lambda: _busy(log), 30, "a worker to be busy", on_timeout=log.read_text)
    os.killpg(cluster.pid, signal.SIGTERM)
    _exits(cluster, log)
    assert not process_group_alive(cluster.pid), "a worker outlived its cluster"


# --- with real runs in flight -----------------------------------------------------------------


def _running(run_id: str) -> bool:
    run = Run.objects.get(pk=run_id)
    return run.status == "running" and "tick" in run.log_tail


@pytest.fixture
def own_instance(settings):
    """Label this test's sandboxes with an instance of its own, so reap() sees only them."""
    settings.BELVEDIR_INSTANCE = f"test-{uuid.uuid4().hex[:8]}"
    return settings.BELVEDIR_INSTANCE


@pytest.mark.docker
def test_a_run_in_flight_finishes_before_a_sigterm_stops_the_cluster(
    sandbox_settings, launch, cluster_of, own_instance
):
    run = launch(env={"SLEEP": "3"})
    cluster, log = cluster_of(
        Q_WORKERS="1", BELVEDIR_INSTANCE=own_instance, **worker_env(sandbox_settings)
    )
    services.run_enqueue(run_id=run.pk)
    wait_for(lambda: _running(run.pk), 120, "the run to start", on_timeout=log.read_text)
    os.kill(cluster.pid, signal.SIGTERM)
    try:
        cluster.wait(timeout=240)
    except Exception:
        pytest.fail(f"qcluster did not exit after its run:\n{log.read_text()}")
    run.refresh_from_db()
    assert run.status == "succeeded", (run.status, run.notes)
    assert not process_group_alive(cluster.pid)
    assert containers_of(run.pk) == []


@pytest.mark.docker
def test_a_run_stopped_by_a_second_sigterm_is_failed_by_the_reaper_and_its_sandbox_removed(
    sandbox_settings, launch, cluster_of, own_instance
):
    run = launch(env={"SLEEP": "600"})
    cluster, log = cluster_of(
        Q_WORKERS="1", BELVEDIR_INSTANCE=own_instance, **worker_env(sandbox_settings)
    )
    services.run_enqueue(run_id=run.pk)
    try:
        wait_for(lambda: _running(run.pk), 120, "the run to start", on_timeout=log.read_text)
        os.kill(cluster.pid, signal.SIGTERM)
        wait_for(lambda: b"stopping" in log.read_bytes(), 30, "the stop to begin")
        os.kill(cluster.pid, signal.SIGTERM)
        _exits(cluster, log)
        assert not process_group_alive(cluster.pid), "a worker outlived its cluster"

        # The run was stopped mid-way: no one beats for it; the reaper fails it.
        assert Run.objects.get(pk=run.pk).status == "running"
        stale = sandbox_settings.BELVEDIR_HEARTBEAT_STALE + 1
        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=stale))
        result = reaper.reap()
        assert result["failed"] == [run.pk]
        run.refresh_from_db()
        assert run.status == "failed" and "stopped responding" in run.notes[-1]
        assert containers_of(run.pk) == []
    finally:
        for container in containers_of(run.pk):
            container.remove(force=True)
