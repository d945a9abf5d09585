"""A second Docker engine on this machine standing in for a second worker host (host B), and a
web process with no engine at all: fixtures for tests/runs/test_two_engines.py and its
neighbours. Registered for the whole suite in tests/conftest.py (`pytest_plugins`).

Host A is this machine's engine; host B a second engine (scripts/second-engine.sh: its own
socket, data root, bridge and sandbox network 172.31.0.0/24 with its own gateway IP).
"""

import contextlib
import fcntl
import subprocess
from collections.abc import Iterable
from pathlib import Path

import docker
import pytest
import requests

from belvedir import isolation
from sandboxes import diskquota
from sandboxes.base import LABEL_RUN_ID

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "second-engine.sh"
ENGINE_A = "unix:///var/run/docker.sock"
NETWORK_B = {
    "BELVEDIR_SANDBOX_NETWORK": "belvedir-sandbox2",
    "BELVEDIR_SANDBOX_SUBNET": "172.31.0.0/24",
    "BELVEDIR_SANDBOX_GATEWAY": "172.31.0.1",
    "BELVEDIR_SANDBOX_BRIDGE": "br-belvedir2",
}
NO_ENGINE = "unix:///run/belvedir-no-engine.sock"  # the web's DOCKER_HOST: nothing answers
# One second engine per machine: test sessions of other worktrees wait for it, or one's stop
# would take the engine away under the other's runs.
LOCK = Path("/tmp/belvedir-second-engine.lock")


@pytest.fixture
def web_without_engine(monkeypatch):
    """This process (the web) reaches no Docker engine; the workers keep their own."""
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    monkeypatch.setattr(isolation, "_cached", None)


def second_engine(command: str) -> str:
    """scripts/second-engine.sh start|stop; start prints B's DOCKER_HOST."""
    done = subprocess.run(
        ["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"second-engine.sh {command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


@pytest.fixture
def engine_b():
    """The second engine's DOCKER_HOST; stopped afterwards (its data root stays, cached),
    held by this test alone (`LOCK`) from start to stop.

    The main engine's default bridge must outlive it: a second dockerd started with
    `--bridge none` deletes `docker0` from the shared network namespace, after which every
    `docker build` on the main engine fails ("could not find bridge docker0").
    """
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        assert _has_link("docker0"), "the main engine's docker0 is missing before the test"
        url = second_engine("start")
        try:
            assert _has_link("docker0"), "starting the second engine removed docker0"
            yield url
        finally:
            second_engine("stop")
        assert _has_link("docker0"), "the second engine removed docker0"


def _has_link(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def containers_on(url: str, run_id: str, *labels: str) -> list:
    """The run's containers (any state) on the engine at `url`, with `labels` too."""
    client = docker.DockerClient(base_url=url)
    try:
        return client.containers.list(
            all=True, filters={"label": [f"{LABEL_RUN_ID}={run_id}", *labels]}, ignore_removed=True
        )
    finally:
        client.close()


def release_host(url: str, data_dir: Path, run_ids: Iterable[str]) -> None:
    """What a test's worker host leaves behind, even when the test failed half-way: the
    runs' containers on the engine at `url` (their anonymous volumes too; nothing when the
    engine is down: a stopped engine's containers go with its next start's reaper) and every
    quota volume in `data_dir`, the test's own (its runs' volumes, the spares its workers
    made), mounted under pytest's temporary folder."""
    with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
        client = docker.DockerClient(base_url=url, timeout=30)
        try:
            for run_id in run_ids:
                for container in containers_on(url, run_id):
                    client.api.remove_container(container.id, force=True, v=True)
        finally:
            client.close()
    for name in diskquota.volume_names(root=data_dir):
        diskquota.release(root=data_dir, name=name)
