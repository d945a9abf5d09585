"""Issue 21, finding 4, with real sandboxes: containers of one organization on the sandbox
network, each holding connections with bodies sent at a legal pace, cannot starve a second
organization's sandbox of its Tasks download. The gateway tells them apart as production's
does: the engine's containers on the network, their run labels, each run's organization."""

import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest
from django.db import connection

from belvedir.sandbox_config import spec_from_settings
from runs.management.commands.sandbox_gateway import organizations_of
from sandboxes import warm
from sandboxes.base import LABEL_RUN_ID
from sandboxes.docker import DockerBackend
from sandboxes.gateway import GatewayThread, Limits
from sandboxes.gateway_tenants import DockerTenants, Tenant, stranger
from tests.helpers import aio
from tests.helpers.run_fixtures import serve_to_sandboxes
from tests.runs.helpers import wait_for
from tests.runs.test_gateway import Recorder, recording_server

pytestmark = [pytest.mark.docker]


def organization_of(run_ids: list[str]) -> dict[str, str]:
    """The command's lookup, leaving no connection open on the tenants' thread after it."""
    try:
        return organizations_of(run_ids)
    finally:
        connection.close()


HOLD = textwrap.dedent(
    """
    import os, socket, time
    host, port = os.environ["GATEWAY"].split(":")
    held = []
    for _ in range(6):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"POST /api/v1/traces HTTP/1.1\\r\\nHost: x\\r\\n"
                     b"Content-Length: 1000000000\\r\\n\\r\\n")
        held.append(sock)
    while held:  # 1000 bytes a second on each: above the minimum rate, held for good
        for sock in list(held):
            try:
                sock.sendall(b"x" * 1000)
            except OSError:
                held.remove(sock)
        time.sleep(1)
    """
)
DOWNLOAD = textwrap.dedent(
    """
    import os, urllib.request
    url = "http://" + os.environ["GATEWAY"] + "/api/v1/runs/run_b/tasks"
    with urllib.request.urlopen(url, timeout=30) as reply:
        print("status", reply.status, reply.read().decode().split()[-1], flush=True)
    """
)


@pytest.mark.django_db(transaction=True)  # the gateway reads the runs on a thread of its own
def test_one_organizations_sandboxes_cannot_starve_another_organizations_download(
    settings, owner, outsider, make_run
):
    runs_a = [make_run(project=owner.project), make_run(project=owner.project)]
    run_b = make_run(project=outsider.project)
    tenants = DockerTenants(
        docker.from_env, network=settings.BELVEDIR_SANDBOX_NETWORK, organization_of=organization_of
    )
    # Test-sized: three sandboxes of 6 would take 18 of 16 if only addresses were counted.
    limits = Limits(total=16, per_organization=8, per_run=8, per_address=6, body_grace=60)
    backend = DockerBackend(instance=f"gateway-e2e-{uuid.uuid4().hex[:8]}")
    handles = []
    Recorder.seen = []
    with recording_server() as upstream:
        gateway = serve_to_sandboxes(
            lambda host, port: GatewayThread(
                host=host, ports=[port], upstream=upstream, limits=limits, tenants=tenants
            )
        )

        def sandbox(run, script):
            spec = spec_from_settings(
                run_id=run.pk,
                command=["python3", "-c", script],
                env={"GATEWAY": gateway.url.removeprefix("http://")},
                cpus=0.25,
                memory="256m",
                disk_bytes=None,
            )
            handles.append(backend.launch(spec))
            return handles[-1]

        try:
            for run in [runs_a[0], runs_a[0], runs_a[1]]:
                sandbox(run, HOLD)
            wait_for(
                lambda: gateway.open_connections() == 8, 60, "the organization's share to fill"
            )
            download = sandbox(run_b, DOWNLOAD)
            exit_code = backend.wait(download, 60)
            output = b"".join(backend.stream_logs(download)).decode()
            held = gateway.open_connections()
        finally:
            for handle in handles:
                backend.kill(handle)
                backend.remove(handle)
            gateway.stop()

    assert exit_code == 0, output
    assert "status 200 [DONE]" in output
    assert held == 8  # the first organization still holds its share, and no more
    assert {seen["path"] for seen in Recorder.seen} >= {"/api/v1/runs/run_b/tasks"}


@pytest.mark.django_db(transaction=True)
def test_a_runs_organization_is_read_from_the_platform(owner, outsider, make_run):
    mine, theirs = make_run(project=owner.project), make_run(project=outsider.project)

    with ThreadPoolExecutor(1) as thread:  # as the gateway asks: on a thread of its own
        found = thread.submit(organization_of, [mine.pk, theirs.pk, "run_nobody"]).result()

    assert found == {
        mine.pk: str(owner.project.organization_id),
        theirs.pk: str(outsider.project.organization_id),
    }


def test_a_warm_sandbox_counts_for_the_run_its_claim_file_names(settings, tmp_path):
    """A warm pool member carries no run label (it was started before any run took it): the
    claim file the taking run wrote says whose it is; unclaimed, it is a stranger. A task
    image's own `belvedir.warm` label does not make its sandbox one: the run label counts."""
    client = docker.from_env()

    def start(labels: dict[str, str]):
        container = client.containers.run(
            settings.BELVEDIR_SANDBOX_IMAGE,
            ["sleep", "60"],
            detach=True,
            network=settings.BELVEDIR_SANDBOX_NETWORK,
            runtime=settings.BELVEDIR_SANDBOX_RUNTIME,
            user="1000:1000",
            cap_drop=["ALL"],
            labels={"belvedir.test": "gateway-warm", **labels},
        )
        started.append(container)
        container.reload()
        networks = container.attrs["NetworkSettings"]["Networks"]
        return container, networks[settings.BELVEDIR_SANDBOX_NETWORK]["IPAddress"]

    started: list = []
    try:
        member, address = start({warm.LABEL_WARM: "test-pool"})
        _, forged = start({warm.LABEL_WARM: "test-pool", LABEL_RUN_ID: "run_task"})
        tenants = DockerTenants(
            docker.from_env,
            network=settings.BELVEDIR_SANDBOX_NETWORK,
            organization_of=lambda run_ids: {"run_warm": "org_w", "run_task": "org_t"},
            warm_dir=tmp_path,
            min_interval=0,
            max_age=0,
        )
        unclaimed = aio.run(tenants.of(address))
        (tmp_path / f"{member.id}.claim").write_text("run_warm")
        claimed = aio.run(tenants.of(address))
        task = aio.run(tenants.of(forged))
    finally:
        for container in started:
            container.remove(force=True)
        client.close()

    assert unclaimed == stranger(address)
    assert claimed == Tenant(address=address, run="run_warm", organization="org_w")
    assert task == Tenant(address=forged, run="run_task", organization="org_t")
