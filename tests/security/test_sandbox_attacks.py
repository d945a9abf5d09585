"""An attacker's harness, run by the platform as `make up` runs it (the isolated network, the
sandbox gateway, gVisor, the disk quota), tries what the adversarial test of issue 8 did.

Decoy listeners stand in for the host's services on every non-loopback host address (a
PostgreSQL or Redis configured to listen everywhere, the Docker API on TCP, SSH, the dev
server's port), so a pass means the firewall stopped the sandbox, not that nothing listened.
Nothing here sends traffic off this machine: the probes target the host's own addresses and
a container of the test's own.
"""

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import threading
import uuid
from pathlib import Path

import docker
import pytest
from django.conf import settings as django_settings

from runs.executor import execute_run
from runs.models import Run
from sandboxes import diskquota
from tests.runs.helpers import containers_of, git_repo_of
from tests.security.containers import listening_address, start_sandbox_like

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

PROBE = Path(__file__).parent / "probe_harness"
# The host services the attack reached, and the Docker API's and SSH's ports.
HOST_PORTS = {"postgresql": 5432, "redis": 6379, "docker-api": 2375, "ssh": 22, "web": 8000}
GiB = 2**30


def host_addresses() -> list[str]:
    """Every IPv4 address of this host but loopback (the gateway IP among them)."""
    done = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
    found = []
    for line in done.stdout.splitlines():
        address = line.split()[3].split("/")[0]
        if not ipaddress.IPv4Address(address).is_loopback:
            found.append(address)
    return found


class Decoys:
    """Listeners on (address, port) that greet whoever connects with DECOY."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.bound: list[tuple[str, str, int]] = []

    def listen(self, label: str, address: str, port: int) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            sock.close()  # a real service holds it there: a target all the same
            self.bound.append((label, address, port))
            return
        sock.listen(16)
        self.sockets.append(sock)
        self.bound.append((label, address, port))
        threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    @staticmethod
    def _serve(sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"DECOY\n")

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def decoys():
    made = Decoys()
    for address in host_addresses():
        for name, port in HOST_PORTS.items():
            made.listen(f"{name}@{address}", address, port)
        made.listen(f"high-port@{address}", address, 18690)  # just below the gateway range
    yield made
    made.close()


@pytest.fixture
def other_sandbox():
    """Another tenant's sandbox on the sandbox network, serving HTTP on port 8080."""
    client = docker.from_env()
    container = start_sandbox_like(client, ["python3", "-m", "http.server", "8080"], role="victim")
    try:
        # From the host it answers: it really listens.
        address = listening_address(container, django_settings.BELVEDIR_SANDBOX_NETWORK, 8080)
        yield address
    finally:
        container.remove(force=True)
        client.close()


@pytest.fixture
def attack_settings(settings, sandbox_gateway, tmp_path):
    settings.BELVEDIR_SANDBOX_MEMORY = "1g"
    settings.BELVEDIR_SANDBOX_CPUS = 1.0
    settings.BELVEDIR_RUN_TIMEOUT = 300
    return settings


@pytest.fixture
def probe_harness(tmp_path, make_harness):
    repo = git_repo_of(PROBE, tmp_path / "probe")

    def make(**fields):
        return make_harness(name=f"probe {uuid.uuid4().hex[:6]}", repo_url=repo, **fields)

    return make


def run_it(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.is_terminal, run.status
    assert containers_of(run.pk) == []
    return run


def test_a_sandbox_reaches_the_platform_and_nothing_else_on_the_host_or_in_other_sandboxes(
    attack_settings, decoys, other_sandbox, probe_harness, owner, django_capture_on_commit_callbacks
):
    from runs import services

    for _, address, port in decoys.bound:  # from the host itself, every decoy answers
        with socket.create_connection((address, port), timeout=3):
            pass
    targets = [*decoys.bound, ("other-sandbox", other_sandbox, 8080)]
    harness = probe_harness(
        install_command="true",
        run_command="python3 run.py",
        env={"PROBE_TARGETS": json.dumps(targets)},
        tasks="task one\ntask two\n",
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_launch(project=owner.project, harness=harness, created_by=owner.user)

    run = run_it(run)

    assert run.status == "succeeded", (run.notes, run.log_tail)
    probe = run.results["probe"]
    reached = {
        label: result for label, result in probe["connections"].items() if "blocked" not in result
    }
    assert reached == {}, f"the sandbox reached {reached}"
    assert {label for label, _, _ in targets} == set(probe["connections"])
    assert any(label.startswith("postgresql@172.30.0.1") for label in probe["connections"])
    # The platform's sandbox-facing endpoints work through the gateway ...
    assert probe["tasks"] == [200, "task one\ntask two\n"]
    assert probe["outcome_status"] in (200, 404)  # answered by the platform, not refused
    # ... and nothing else of it does.
    assert probe["admin_status"] == 404
    assert probe["keys_status"] == 404
    assert probe["docker_socket"] is False
    assert all(result.startswith("refused") for result in probe["writes"].values())


def test_a_sandbox_writing_past_its_disk_quota_fails_with_a_note_and_the_host_keeps_its_space(
    attack_settings, probe_harness, owner, django_capture_on_commit_callbacks
):
    from runs import services

    attack_settings.BELVEDIR_SANDBOX_DISK = 1 * GiB
    data_dir = Path(attack_settings.BELVEDIR_SANDBOX_DATA_DIR)
    harness = probe_harness(
        install_command="true",
        run_command="bash fill.sh",
        env={"PROBE_WRITE_BYTES": str(3 * 10**9)},
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_launch(project=owner.project, harness=harness, created_by=owner.user)
    free_before = diskquota.free_disk_bytes(data_dir)
    lowest = [free_before]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            lowest.append(diskquota.free_disk_bytes(data_dir))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = run_it(run)
    finally:
        done.set()
        watcher.join(5)

    assert run.status == "failed", (run.notes, run.log_tail)
    assert any("disk quota" in note and "1.0 GiB" in note for note in run.notes), run.notes
    assert "No space left on device" in run.log_tail
    # Other work on this machine moves the free space a little; a 3 GB write would not hide.
    assert free_before - min(lowest) < 1 * GiB + 512 * 2**20
    assert not any(name.startswith(run.pk.replace("_", "-")) for name in os.listdir(data_dir))
    assert shutil.disk_usage(data_dir).free > free_before - 512 * 2**20
