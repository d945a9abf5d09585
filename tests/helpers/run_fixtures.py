"""Fixtures for tests that run the example harness in real sandboxes (runs, browser, traces).

Registered for the whole suite in tests/conftest.py (`pytest_plugins`).
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harnesses.services import harness_create
from tests.runs.helpers import EXAMPLES, git_repo_of, subprocess_database_url, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def contract_repo(tmp_path) -> str:
    return git_repo_of(EXAMPLES / "contract-harness", tmp_path / "contract-harness")


@pytest.fixture
def sandbox_settings(settings, live_server):
    """Sandboxes on host networking that reach this test's live server on 127.0.0.1."""
    settings.BELVEDIR_SANDBOX_BASE_URL = live_server.url
    settings.BELVEDIR_SANDBOX_NETWORK = "host"
    settings.BELVEDIR_SANDBOX_MEMORY = "1g"
    settings.BELVEDIR_SANDBOX_CPUS = 1.0
    settings.BELVEDIR_RUN_TIMEOUT = 120
    return settings


@pytest.fixture
def make_harness(owner, contract_repo):
    def make(name: str = "contract", **fields):
        data = {
            "name": name,
            "repo_url": contract_repo,
            "install_command": "bash install.sh",
            "run_command": "python3 run.py",
            **fields,
        }
        return harness_create(project=owner.project, created_by=owner.user, **data)

    return make


@pytest.fixture
def cluster(live_server, tmp_path):
    """`manage.py qcluster` on this test's database (the ORM broker), stopped afterwards."""
    log = tmp_path / "qcluster.log"
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "Q_WORKERS": "1",
        "Q_CLUSTER_NAME": "runs",
        "BELVEDIR_SANDBOX_BASE_URL": live_server.url,
        "BELVEDIR_SANDBOX_NETWORK": "host",
        "BELVEDIR_SANDBOX_MEMORY": "1g",
        "BELVEDIR_SANDBOX_CPUS": "1",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers share its process group
        )
    try:
        wait_for(
            lambda: process.poll() is not None or b"running." in log.read_bytes(),
            30,
            "the cluster to start",
        )
        assert process.poll() is None, log.read_text()
        yield log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        try:
            os.killpg(process.pid, signal.SIGKILL)  # any worker left behind
        except ProcessLookupError:
            pass
