"""Fixtures for tests that run the example harness in real sandboxes (runs, browser, traces).

Registered for the whole suite in tests/conftest.py (`pytest_plugins`).
"""

import pytest

from harnesses.services import harness_create
from tests.runs.helpers import EXAMPLES, git_repo_of, start_qcluster, stop_qcluster


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
    """The runs cluster (`Q_CLUSTER_NAME=runs manage.py qcluster`, one worker) on this test's
    database (the ORM broker), stopped afterwards the way scripts/up.sh stops it."""
    log = tmp_path / "qcluster.log"
    process = start_qcluster(
        "runs",
        log,
        Q_WORKERS="1",
        BELVEDIR_SANDBOX_BASE_URL=live_server.url,
        BELVEDIR_SANDBOX_NETWORK="host",
        BELVEDIR_SANDBOX_MEMORY="1g",
        BELVEDIR_SANDBOX_CPUS="1",
    )
    try:
        yield log
    finally:
        stop_qcluster(process)
