"""Task sandboxes on several worker hosts: a managed Harbor run that worker host B claimed gets
its task sandboxes on B's engine, on B's sandbox network beside the run's own sandbox. B's
sandbox gateway sends the task-sandbox paths to a platform process on B (uvicorn, B's
DOCKER_HOST), everything else to the web; the web (no engine, as behind a load balancer)
refuses them naming both hosts; a cancel from the web ends the run, and B's worker removes
its task sandboxes from B within seconds. (The harness is the loop of
tests/harbor/test_task_sandboxes_e2e.py standing in for Harbor.)
"""

import os
import subprocess
import sys

import docker
import pytest
from django.db import connection

from belvedir import crypto
from belvedir.sandbox_config import worker_host
from billing.models import Kind
from billing.services import ledger_operator_entry
from harbor.models import TaskSandbox
from runs.models import Run, Status, WorkerHost
from runs.services import run_launch
from sandboxes.base import LABEL_TASK_SANDBOX
from sandboxes.gateway import GatewayThread
from tests.helpers.engines import ENGINE_A, NETWORK_B, containers_on, release_host
from tests.helpers.run_fixtures import sandbox_ports, worker_env
from tests.helpers.task_sandboxes import Client, context_tar, fresh_dockerfile, loop_repo_at
from tests.router.helpers import ROOT, free_port, start_uvicorn
from tests.runs.helpers import subprocess_database_url, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_run_on_engine_b_gets_its_task_sandboxes_on_b_and_the_web_refuses_them(
    sandbox_settings,
    engine_b,
    web_without_engine,
    live_server,
    owner,
    make_harness,
    tmp_path,
    django_capture_on_commit_callbacks,
):
    data_b = tmp_path / "host-b" / "sandboxes"  # B's quota volumes, released at the end
    host_b = {
        **worker_env(sandbox_settings),
        **NETWORK_B,
        "BELVEDIR_WORKER_HOST": "host-b",
        "DOCKER_HOST": engine_b,
        "BELVEDIR_SANDBOX_DATA_DIR": str(data_b),
        "BELVEDIR_HARBOR_IMAGE": "belvedir-sandbox:latest",  # the loop needs no Harbor
    }
    port = free_port()
    web_b = start_uvicorn(  # B's own platform process: not behind the load balancer
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / "web-b.log",
        **host_b,
    )
    gateway_b = GatewayThread(
        host=NETWORK_B["BELVEDIR_SANDBOX_GATEWAY"],
        ports=sandbox_ports(),
        upstream=live_server.url,
        task_upstream=f"http://127.0.0.1:{port}",
    )
    host_b["BELVEDIR_SANDBOX_BASE_URL"] = gateway_b.url
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=5_000_000, note="tests"
    )
    WorkerHost.objects.create(name="host-b", engine=f"host-b {engine_b}")  # ready: launches pass
    harness = make_harness(
        name="loop",
        repo_url=loop_repo_at(tmp_path / "loop"),
        install_command="true",
        run_command="python3 run.py",
        env={"TASKS": "1"},
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = run_launch(project=owner.project, harness=harness, created_by=owner.user)
    snapshot = {**run.harness_snapshot, "preset": "harbor-runner"}  # a managed Harbor run
    Run.objects.filter(pk=run.pk).update(harness_snapshot=snapshot)
    code = (
        "import django; django.setup(); from runs.executor import execute_run; "
        f"execute_run({run.pk!r})"
    )  # B's worker, as its runs cluster would run it
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), **host_b}
    worker_b = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env)

    def log() -> str:
        web = (tmp_path / "web-b.log").read_text()[-3000:]
        return f"run:\n{Run.objects.get(pk=run.pk).log_tail}\nweb on B:\n{web}"

    try:
        wait_for(
            lambda: (r := Run.objects.get(pk=run.pk)).is_terminal or "tick" in r.log_tail,
            240,
            "the run on B to start a task sandbox",
            on_timeout=log,
        )
        run.refresh_from_db()
        assert run.status == "running" and "tick" in run.log_tail, log()
        assert run.engine == f"host-b {engine_b}"
        assert "create 201" in run.log_tail and "hello from task bash in /app" in run.log_tail
        (task,) = containers_on(engine_b, run.pk, LABEL_TASK_SANDBOX)
        (own,) = [c for c in containers_on(engine_b, run.pk) if c.id != task.id]
        assert task.status == "running"
        networks = [c.attrs["HostConfig"]["NetworkMode"] for c in (task, own)]
        assert networks == ["belvedir-sandbox2", "belvedir-sandbox2"]  # B's bridge, together
        (row,) = TaskSandbox.objects.filter(run=run)
        assert (row.status, row.container_id) == ("running", task.id)
        assert containers_on(ENGINE_A, run.pk) == []

        # The web (behind the load balancer, on no engine) refuses them, naming both hosts.
        web = Client(live_server.url, crypto.decrypt(run.run_key_encrypted))
        refused = [
            web.create("elsewhere", context_tar(fresh_dockerfile())),
            web.call(
                "POST",
                f"/task-sandboxes/{row.pk}/exec",
                b'{"command": "true"}',
                {"Content-Type": "application/json"},
            ),
        ]
        for answer in refused:
            assert answer.status == 409 and answer.json()["code"] == "wrong_host", answer.body
            detail = answer.json()["detail"]
            assert f"worker host host-b (engine {engine_b})" in detail
            assert f"this platform process is on {worker_host()} " in detail
        assert len(containers_on(engine_b, run.pk)) == 2
        assert TaskSandbox.objects.filter(run=run).count() == 1

        # A cancel from the web: B's worker ends the run and takes its task sandbox with it.
        assert owner.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200
        wait_for(lambda: containers_on(engine_b, run.pk) == [], 20, "B to remove both")
        assert worker_b.wait(60) == 0
        assert Run.objects.get(pk=run.pk).status == Status.CANCELLED
        assert TaskSandbox.objects.get(pk=row.pk).status == "stopped"
    finally:
        if worker_b.poll() is None:
            worker_b.kill()
            worker_b.wait()
        web_b.terminate()
        web_b.wait(20)
        gateway_b.stop()
        release_host(engine_b, data_b, [run.pk])
        _remove_images(engine_b, set(TaskSandbox.objects.values_list("image", flat=True)))


def _remove_images(url: str, images: set[str]) -> None:
    """This test's task images on B (B's data root outlives the test)."""
    client = docker.DockerClient(base_url=url)
    try:
        for image in images - {""}:
            try:
                client.images.remove(image, force=True)
            except docker.errors.DockerException:
                pass
    finally:
        client.close()
