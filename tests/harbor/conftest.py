"""Fixtures for harbor: the run fixtures are in tests/helpers/run_fixtures.py, the task
sandboxes' in tests/helpers/task_sandboxes.py."""

import pytest

from tests.helpers.run_fixtures import fast_hashing


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    fast_hashing(settings)
