"""Sandboxes reach the internet and nothing private: RFC 1918 and CGNAT networks are dropped.

A decoy listens in a container of the test's own on a second Docker network (10.x), whose
bridge is not named `br-…`, so the private-network rule is what stands between it and a
sandbox. DNS still works through Docker's embedded resolver (its lookup to this machine's
resolver is the only traffic leaving the host, the one every container makes).
"""

import random
import subprocess
import uuid

import docker
import pytest

from sandboxes import network
from tests.security.containers import listening_address, start_sandbox_like

pytestmark = pytest.mark.docker


def drop_counter(cidr: str) -> int:
    """Packets the forward chain dropped for `cidr` so far."""
    done = subprocess.run(
        ["iptables", "-L", network.FWD_CHAIN, "-v", "-x", "-n"],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) > 8 and fields[2] == "DROP" and fields[8] == cidr:
            return int(fields[0])
    raise AssertionError(f"no DROP rule for {cidr} in {network.FWD_CHAIN}:\n{done.stdout}")


def in_sandbox(client: docker.DockerClient, command: list[str]) -> tuple[int, str]:
    """Run `command` in a sandbox-like container on the sandbox network; (exit code, output)."""
    container = start_sandbox_like(client, command, role="prober")
    try:
        code = container.wait(timeout=60)["StatusCode"]
        return code, container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)


@pytest.fixture
def private_decoy():
    """(client, address) of an HTTP listener in a container on a 10.x Docker network."""
    client = docker.from_env()
    tag = uuid.uuid4().hex[:6]
    subnet = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    decoy_net = client.networks.create(
        f"belvedir-test-private-{tag}",
        driver="bridge",
        ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet)]),
        options={"com.docker.network.bridge.name": f"bvdecoy{tag}"},
        labels={"belvedir.test": "private-decoy"},
    )
    container = None
    try:
        container = start_sandbox_like(
            client,
            ["python3", "-m", "http.server", "8080"],
            role="private-decoy",
            network=decoy_net.name,
        )
        # From the host it answers: it really listens.
        yield client, listening_address(container, decoy_net.name, 8080)
    finally:
        if container is not None:
            container.remove(force=True)
        decoy_net.remove()
        client.close()


def test_a_sandbox_cannot_reach_a_listener_on_a_private_network(private_decoy):
    client, address = private_decoy
    before = drop_counter("10.0.0.0/8")
    probe = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(({address!r}, 8080), timeout=3).close()\n"
        "    print('open')\n"
        "except OSError as exc:\n"
        "    print('blocked', exc.__class__.__name__)\n"
    )

    code, output = in_sandbox(client, ["python3", "-c", probe])

    assert code == 0, output
    assert output.startswith("blocked"), output
    assert drop_counter("10.0.0.0/8") > before  # the private-network rule dropped it


def test_names_still_resolve_in_a_sandbox_through_dockers_embedded_dns():
    client = docker.from_env()
    try:
        code, output = in_sandbox(client, ["getent", "hosts", "pypi.org"])
    finally:
        client.close()

    assert code == 0, output
    assert "pypi.org" in output
