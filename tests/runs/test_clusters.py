"""Two django-q2 clusters: housekeeping never waits behind runs, and stopping a cluster's
process group leaves none of its workers behind."""

import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.tasks import async_task

from runs import services
from runs.models import Run
from tests.runs.helpers import (
    process_group_alive,
    start_qcluster,
    stop_qcluster,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True)]


def _busy(log) -> bool:
    return b"processing" in log.read_bytes()


@pytest.mark.docker  # the reaper asks the Docker engine for the run's sandbox
def test_housekeeping_reaps_a_lost_run_while_every_run_worker_is_busy(
    owner, launch, tmp_path, settings
):
    instance = f"test-{uuid.uuid4().hex[:8]}"  # the reaper sees only this test's sandboxes
    runs_log, housekeeping_log = tmp_path / "runs.log", tmp_path / "housekeeping.log"
    runs_cluster = start_qcluster("runs", runs_log, Q_WORKERS="1", BELVEDIR_INSTANCE=instance)
    housekeeping = None
    try:
        async_task("time.sleep", 600, cluster="runs")  # the one run worker is taken
        wait_for(
            lambda: _busy(runs_log), 30, "the run worker to be busy", on_timeout=runs_log.read_text
        )
        waiting = launch()
        services.run_enqueue(run_id=waiting.pk)
        lost = Run.objects.create(
            project=owner.project,
            harness_name="lost",
            status="running",
            started_at=timezone.now() - timedelta(hours=1),
            heartbeat_at=timezone.now() - timedelta(hours=1),
        )
        call_command("setup_schedules", stdout=open("/dev/null", "w"))
        housekeeping = start_qcluster("housekeeping", housekeeping_log, BELVEDIR_INSTANCE=instance)

        # Its due schedules are queued as it starts, not at django-q2's first pass 30 s later.
        lost = wait_for(
            lambda: (r := Run.objects.get(pk=lost.pk)).status == "failed" and r,
            25,
            "the reaper to fail the lost run as the housekeeping cluster starts",
            every=0.5,
            on_timeout=housekeeping_log.read_text,
        )
        assert any("stopped responding" in note for note in lost.notes), lost.notes
        # The run behind the busy worker still waits, with its place in the queue shown.
        assert Run.objects.get(pk=waiting.pk).status == "queued"
        assert owner.api.get(f"/api/v1/runs/{waiting.pk}").json()["queue_position"] == 1
        page = owner.web.get(f"/runs/{waiting.pk}/").content.decode()
        assert "queued, position 1" in page
    finally:
        stop_qcluster(runs_cluster)
        if housekeeping is not None:
            stop_qcluster(housekeeping)


def test_stopping_a_clusters_process_group_leaves_no_worker_behind(tmp_path):
    log = tmp_path / "runs.log"
    cluster = start_qcluster("runs", log, Q_WORKERS="2")
    try:
        async_task("time.sleep", 600, cluster="runs")
        wait_for(lambda: _busy(log), 30, "a worker to be busy", on_timeout=log.read_text)
        assert process_group_alive(cluster.pid)
        stop_qcluster(cluster, grace=20)
        assert not process_group_alive(cluster.pid), "a worker outlived its cluster"
    finally:
        if process_group_alive(cluster.pid):
            stop_qcluster(cluster, grace=1)


def test_a_sigterm_to_an_idle_clusters_main_process_stops_its_workers(tmp_path):
    import os
    import signal

    log = tmp_path / "runs.log"
    cluster = start_qcluster("runs", log, Q_WORKERS="2")
    try:
        os.kill(cluster.pid, signal.SIGTERM)
        cluster.wait(timeout=30)
        wait_for(lambda: not process_group_alive(cluster.pid), 30, "the workers to stop")
        assert b"has stopped" in log.read_bytes()
    finally:
        if process_group_alive(cluster.pid):
            stop_qcluster(cluster, grace=1)


def test_runs_go_to_the_runs_queue_and_schedules_to_housekeeping(owner, make_run):
    from django_q.models import OrmQ, Schedule

    run = make_run(status="queued")
    services.run_enqueue(run_id=run.pk)
    assert list(OrmQ.objects.values_list("key", flat=True)) == ["runs"]
    call_command("setup_schedules", stdout=open("/dev/null", "w"))
    clusters = set(Schedule.objects.values_list("cluster", flat=True))
    assert clusters == {"housekeeping"}


def test_a_busy_cluster_leaves_the_tasks_it_cannot_start_in_the_queue_for_other_hosts(tmp_path):
    log = tmp_path / "runs.log"
    cluster = start_qcluster("runs", log, Q_WORKERS="2")
    broker = get_broker("runs")
    try:
        for _ in range(8):
            async_task("time.sleep", 600, cluster="runs")
        wait_for(lambda: log.read_bytes().count(b"processing") >= 2, 30, "both workers to be busy")
        wait_for(lambda: broker.lock_size() >= 4, 10, "the cluster to take what it may")
        # Two running, one in the cluster's queue (Q_QUEUE_LIMIT=1), one in its pusher's hand:
        # django-q2's default (workers², 4 here) would have taken all but one.
        assert (broker.lock_size(), broker.queue_size()) == (4, 4)
    finally:
        stop_qcluster(cluster, grace=1)
        broker.purge_queue()


@pytest.mark.docker
def test_a_host_coming_back_removes_its_failed_runs_sandboxes_before_taking_a_task(
    make_run, tmp_path, settings
):
    """Its runs were failed by the other hosts while it was gone; their sandboxes (its engine
    kept them) must not run beside the new runs it takes until its first timed reaper pass."""
    from pathlib import Path

    from belvedir.sandbox_config import spec_from_settings
    from sandboxes.docker import DockerBackend

    instance = f"test-{uuid.uuid4().hex[:8]}"  # the reaper sees only this test's sandboxes
    engine = DockerBackend(instance=instance, data_dir=Path(settings.BELVEDIR_SANDBOX_DATA_DIR))
    failed = make_run(status="failed")
    handle = engine.launch(
        spec_from_settings(run_id=failed.pk, command=["sleep", "60"], network="none")
    )
    log = tmp_path / "runs.log"
    cluster = None
    try:
        cluster = start_qcluster(
            "runs", log, Q_WORKERS="1", BELVEDIR_INSTANCE=instance, BELVEDIR_REAP_SECONDS="600"
        )
        assert engine.list_by_label() == [], log.read_text()
    finally:
        if cluster is not None:
            stop_qcluster(cluster, grace=1)
        if engine.list_by_label():
            engine.kill(handle)
            engine.remove(handle)
