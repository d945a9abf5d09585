"""Fixtures for harbor: the run fixtures are in tests/helpers/run_fixtures.py, the task
sandboxes' in tests/helpers/task_sandboxes.py."""

import pytest

from tests.helpers.run_fixtures import fast_hashing
from tests.helpers.task_sandboxes import managed_client


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    fast_hashing(settings)


@pytest.fixture
def managed(owner, sandbox_settings, task_images):
    """A managed Harbor run and a client calling its task sandboxes with its key."""
    return managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)


@pytest.fixture
def engine_started(monkeypatch):
    """The argv of every `docker exec` the platform starts in a sandbox, from here on."""
    from docker.api.exec_api import ExecApiMixin

    seen: list[list[str]] = []
    original = ExecApiMixin.exec_create

    def counted(self, container, cmd, *args, **kwargs):
        seen.append(list(cmd))
        return original(self, container, cmd, *args, **kwargs)

    monkeypatch.setattr(ExecApiMixin, "exec_create", counted)
    return seen


@pytest.fixture
def started(engine_started, monkeypatch):
    """The argv of every process the platform starts in a sandbox, from here on: by `docker
    exec` or by the sandbox's exec server (sandboxes/taskd.py; one it declines counts once,
    as the engine's). Counted in this process: the API is served by the test's live server,
    a thread of it (so are the exec server's per-process caches the tests set)."""
    from tests.helpers.task_sandboxes import count_served

    count_served(monkeypatch, engine_started)
    return engine_started
