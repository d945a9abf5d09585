"""Two worker hosts on one PostgreSQL: each with its own Docker engine and its own cluster.

Host A is this machine's engine; host B a second engine (scripts/second-engine.sh: its own
socket, data root, bridge and sandbox network 172.31.0.0/24 with its own gateway). The web
(this test process) has no engine at all, as a web replica behind a load balancer. Runs
launched through the API spread over both hosts, each records the engine it runs on and its
sandbox lives there; a cancel from the web stops B's run; B's live log reaches the API; and
when B's cluster and engine are killed mid-run, host A fails B's run with a `belvedir:` note
after the stale period while never touching B's sandboxes, which B's own reaper removes once
B is back.
"""

import os
import signal
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run, WorkerHost
from sandboxes.gateway import GatewayThread
from tests.helpers.engines import ENGINE_A, NETWORK_B, containers_on, release_host, second_engine
from tests.helpers.run_fixtures import sandbox_ports, worker_env
from tests.runs.helpers import queue_entries, start_qcluster, stop_qcluster, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
STALE = 5  # seconds without a heartbeat before another host fails the run
HELD = 5  # seconds an idle host takes at most to start a run its cluster took off the queue


def test_a_web_without_an_engine_refuses_launches_until_a_worker_host_is_ready(
    sandbox_settings, web_without_engine, owner, make_harness, settings
):
    harness = make_harness()

    def launch():
        return owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")

    assert launch().status_code == 503  # no worker host has reported
    WorkerHost.objects.create(name="gone", engine=f"gone {ENGINE_A}")
    WorkerHost.objects.filter(name="gone").update(
        seen_at=timezone.now() - timedelta(seconds=settings.BELVEDIR_HEARTBEAT_STALE + 1)
    )
    WorkerHost.objects.create(name="open", engine="open x", problems=["no firewall rules"])
    response = launch()
    assert response.status_code == 503, response.content  # one stale, one not isolated
    assert "not answering" in response.json()["detail"]
    WorkerHost.objects.create(name="ready", engine=f"ready {ENGINE_A}")
    assert launch().status_code == 201


def test_runs_spread_over_two_engines_and_a_vanished_host_is_reaped_by_the_other(
    sandbox_settings, engine_b, web_without_engine, live_server, owner, make_harness, tmp_path
):
    gateway_b = GatewayThread(
        host=NETWORK_B["BELVEDIR_SANDBOX_GATEWAY"], ports=sandbox_ports(), upstream=live_server.url
    )
    common = {
        **worker_env(sandbox_settings),
        "Q_WORKERS": "1",
        "BELVEDIR_HEARTBEAT_STALE": str(STALE),
        "BELVEDIR_REAP_SECONDS": "1",
    }
    # Each host's quota volumes in a folder of the test's own, released at its end.
    data_a, data_b = tmp_path / "host-a" / "sandboxes", tmp_path / "host-b" / "sandboxes"
    host_a = {
        **common,
        "BELVEDIR_WORKER_HOST": "host-a",
        "DOCKER_HOST": ENGINE_A,
        "BELVEDIR_SANDBOX_DATA_DIR": str(data_a),
    }
    host_b = {
        **common,
        **NETWORK_B,
        "BELVEDIR_WORKER_HOST": "host-b",
        "DOCKER_HOST": engine_b,
        "BELVEDIR_SANDBOX_BASE_URL": gateway_b.url,
        "BELVEDIR_SANDBOX_DATA_DIR": str(data_b),
    }
    engines = {"host-a": ENGINE_A, "host-b": engine_b}
    log_a, log_b = tmp_path / "host-a.log", tmp_path / "host-b.log"
    cluster_a = cluster_b = None
    launched: list[str] = []
    try:
        cluster_a = start_qcluster("runs", log_a, **host_a)
        cluster_b = start_qcluster("runs", log_b, **host_b)
        # Each host reported itself and its engine, isolated; the web launches on their word.
        wait_for(lambda: WorkerHost.objects.filter(problems=[]).count() == 2, 30, "both hosts")
        assert dict(WorkerHost.objects.values_list("name", "engine")) == {
            host: f"{host} {url}" for host, url in engines.items()
        }
        harness = make_harness(env={"SLEEP": "100"})

        def logs() -> str:
            """Both hosts' logs, and each run: where and how long after its launch it was claimed
            (a host that took a task but claims it late shows here)."""
            runs = [
                f"{r.pk} {r.status} {r.engine.split(' ')[0] or '-'} stage={r.stage or '-'} claimed "
                + (
                    f"{(r.started_at - r.created_at).total_seconds():.1f} s after launch"
                    if r.started_at
                    else "-"
                )
                for r in Run.objects.order_by("created_at")
            ]
            return (
                "runs:\n" + "\n".join(runs) + f"\nhost A:\n{log_a.read_text()[-3000:]}"
                f"\nhost B:\n{log_b.read_text()[-3000:]}"
            )

        def running_on(host: str) -> Run | None:
            return Run.objects.filter(status="running", engine__startswith=f"{host} ").first()

        def claimed_on(host: str) -> Run:
            """Launch runs until `host` runs one (or return the one it runs already: either host
            may claim the first launch). A busy host's cluster holds at most two tasks it cannot
            start yet (django-q2's queue of one, and one in hand), so the idle host gets the third
            at the latest. The next run is launched as soon as the last one is the other host's:
            running there, or taken off the queue yet not started by `host` within HELD s."""
            for _ in range(4):
                if found := running_on(host):  # it took a run launched while waiting for the other
                    return found
                response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
                if response.status_code != 201:  # e.g. the cap: the hosts' logs say why
                    pytest.fail(f"{response.content!r} before {host} claimed a run\n{logs()}")
                run_id = response.json()["id"]
                launched.append(run_id)
                deadline, taken_at = time.monotonic() + 20, None
                while time.monotonic() < deadline:
                    if found := running_on(host):
                        return found
                    if Run.objects.get(pk=run_id).status == "running":  # the other host's
                        break
                    if taken_at is None and any(
                        q.lock > timezone.now() for q in queue_entries(run_id)
                    ):
                        taken_at = time.monotonic()  # a cluster took it (django-q2 locks the entry)
                    if taken_at is not None and time.monotonic() - taken_at > HELD:
                        break  # held in the other, busy host's cluster
                    time.sleep(0.3)
            pytest.fail(f"{host} claimed none of {launched}\n{logs()}")

        run_a, run_b = claimed_on("host-a"), claimed_on("host-b")
        for run, host in ((run_a, "host-a"), (run_b, "host-b")):
            assert run.engine == f"{host} {engines[host]}"
            other = next(h for h in engines if h != host)
            wait_for(lambda r=run, e=engines[host]: _names(e, r.pk), 30, "its sandbox")
            assert containers_on(engines[other], run.pk) == []
        # Q_WORKERS=1 on each host: never two runs at once on one host.
        assert Run.objects.filter(status="running", engine__startswith="host-a ").count() == 1
        assert Run.objects.filter(status="running", engine__startswith="host-b ").count() == 1

        # B's live log reaches the API (from the database, not from the web's engine).
        wait_for(
            lambda: "tick 1" in owner.api.get(f"/api/v1/runs/{run_b.pk}/log").content.decode(),
            60,
            "host B's log",
            on_timeout=logs,
        )
        # A cancel from the web, whose own engine is A's, stops the run on B.
        response = owner.api.post(f"/api/v1/runs/{run_b.pk}/cancel")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        wait_for(lambda: containers_on(engine_b, run_b.pk) == [], 30, "B to remove its sandbox")

        # Another run on B, then B's cluster and engine go away mid-run.
        lost = claimed_on("host-b")
        wait_for(lambda: _names(engine_b, lost.pk), 30, "the sandbox on B")
        os.killpg(cluster_b.pid, signal.SIGKILL)
        cluster_b.wait(timeout=30)
        second_engine("stop")
        failed = wait_for(
            lambda: (r := Run.objects.get(pk=lost.pk)).status == "failed" and r,
            STALE + 60,
            "host A to fail host B's lost run",
            every=0.5,
            on_timeout=logs,
        )
        assert (
            "belvedir: the worker running this run stopped responding (no heartbeat for "
            f"{STALE} s on host-b); the run was failed and its sandbox removed." in failed.notes
        ), failed.notes
        assert Run.objects.get(pk=run_a.pk).status == "running"  # A's own run goes on
        assert _names(ENGINE_A, run_a.pk)

        # Host A never touched B's sandbox: it is still on B when B comes back, and B's own
        # reaper removes it then.
        assert second_engine("start") == engine_b
        assert _names(engine_b, lost.pk)
        cluster_b = start_qcluster("runs", log_b, **host_b)
        wait_for(lambda: containers_on(engine_b, lost.pk) == [], 60, "B's reaper", on_timeout=logs)
        wait_for(
            lambda: not any(p.is_mount() for p in data_b.iterdir()),
            60,
            "B's reaper to release the lost run's disk volume",
            on_timeout=logs,
        )
    finally:
        for run_id in launched:
            owner.api.post(f"/api/v1/runs/{run_id}/cancel")
        for cluster in (cluster_a, cluster_b):
            if cluster is not None and cluster.poll() is None:
                stop_qcluster(cluster)
        gateway_b.stop()
        release_host(ENGINE_A, data_a, launched)
        release_host(engine_b, data_b, launched)


def _names(url: str, run_id: str) -> list[str]:
    return [c.id for c in containers_on(url, run_id)]
