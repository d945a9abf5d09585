"""One sandbox cannot find another through DNS: Docker's embedded resolver (127.0.0.11 on the
sandbox network) answers every container's name, short id and address, so sandboxes are
named at random (no run id) and ask the host's nameservers instead.

Two real sandboxes of the platform's backend (gVisor, the sandbox network, a disk quota):
the prober looks the victim up by everything an attacker might know or guess.
"""

import json
import uuid

import pytest

from belvedir.sandbox_config import get_backend, spec_from_settings
from sandboxes import network
from sandboxes.base import SandboxHandle

pytestmark = [pytest.mark.docker, pytest.mark.django_db]

PROBE = r"""
import json, socket, struct, subprocess, sys

name, run_id, short_id, address = sys.argv[1:5]


def getent(key):
    return subprocess.run(["getent", "hosts", key], capture_output=True, text=True).stdout.strip()


def embedded_reverse(address):
    # A hand-made PTR query straight to Docker's embedded resolver, past resolv.conf.
    labels = [*reversed(address.split(".")), "in-addr", "arpa"]
    qname = b"".join(bytes([len(p)]) + p.encode() for p in labels) + b"\0"
    query = struct.pack(">HHHHHH", 0x5AFE, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 12, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        try:
            sock.sendto(query, ("127.0.0.11", 53))
            return sock.recv(4096).decode("latin-1")
        except OSError as exc:
            return f"no answer: {exc}"


print(json.dumps({
    "name": getent(name),
    "run_id": getent(run_id),
    "short_id": getent(short_id),
    "address": getent(address),
    "embedded_reverse": embedded_reverse(address),
    "resolv_conf": open("/etc/resolv.conf").read(),
}), flush=True)
"""


@pytest.fixture
def sandboxes(sandbox_settings):
    backend = get_backend()
    handles: list[SandboxHandle] = []

    def launch(command: list[str]) -> SandboxHandle:
        spec = spec_from_settings(
            run_id=f"run_dnsprobe{uuid.uuid4().hex[:10]}", command=command, workdir="/workspace"
        )
        handles.append(backend.launch(spec))
        return handles[-1]

    yield backend, launch
    for handle in handles:
        backend.remove(handle)


def test_a_sandbox_cannot_resolve_another_sandbox_by_name_run_id_or_address(sandboxes):
    backend, launch = sandboxes
    victim = launch(["sleep", "120"])
    info = backend.client.api.inspect_container(victim.id)
    name = info["Name"].lstrip("/")
    endpoint = info["NetworkSettings"]["Networks"][network.NetworkConfig().name]
    address = endpoint["IPAddress"]
    assert victim.run_id not in name, f"the sandbox's name {name} carries its run id"
    assert not [alias for alias in endpoint["Aliases"] or [] if alias != victim.id[:12]]

    prober = launch(["python3", "-c", PROBE, name, victim.run_id, victim.id[:12], address])
    assert backend.wait(prober, timeout=60) == 0
    output = b"".join(backend.stream_logs(prober)).decode()
    found = json.loads(output.strip().splitlines()[-1])

    assert found["name"] == "", f"its name resolved: {found['name']}"
    assert found["run_id"] == "", f"its run id resolved: {found['run_id']}"
    assert found["short_id"] == "", f"its short id resolved: {found['short_id']}"
    assert name not in found["address"], f"its address named it: {found['address']}"
    # The embedded resolver still answers a query sent to it by hand, but what it can say of
    # a sandbox is a random name: never its run id.
    assert victim.run_id not in found["embedded_reverse"]
    # What the sandbox asks instead: the host's nameservers, the ones its firewall lets through.
    servers = network.host_resolvers()
    assert found["resolv_conf"] == "".join(f"nameserver {server}\n" for server in servers)
