"""Fixtures for runs: the example harness in a local git repo, sandbox settings for tests."""

import shutil
import subprocess
from pathlib import Path

import pytest

from harnesses.services import harness_create
from runs import services

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def git_repo_of(source: Path, dest: Path) -> str:
    """Commit a copy of `source` into a new git repository; its file:// URL."""
    shutil.copytree(source, dest)
    run = lambda *a: subprocess.run(["git", *a], cwd=dest, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "harness")
    return f"file://{dest}"


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
        return harness_create(project=owner.project, data=data, created_by=owner.user)

    return make


@pytest.fixture
def launch(owner, make_harness, django_capture_on_commit_callbacks):
    """Launch a run of a fresh harness (the enqueue is captured, not sent to a broker)."""

    def do(env: dict | None = None, tasks: str = "", **launch_args):
        harness = make_harness(
            name=f"h{launch_args.pop('n', '')}{len(env or {})}{abs(hash(str(env)))}"[:60],
            env=env or {},
            tasks=tasks,
        )
        with django_capture_on_commit_callbacks(execute=False):
            return services.run_launch(
                project=owner.project, harness=harness, created_by=owner.user, **launch_args
            )

    return do
