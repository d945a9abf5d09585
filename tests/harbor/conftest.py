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
