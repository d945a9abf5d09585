"""`manage.py qcluster` stops on SIGTERM: at once when idle, after the work in flight otherwise
(or at a second SIGTERM, or after Q_STOP_GRACE), and leaves none of its processes behind.
Bounds here are generous ("it exits"), not speed targets."""

import os
import signal

import pytest
from django_q.tasks import async_task

from runs.management.commands.qcluster import descendants
from tests.runs.helpers import (
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
