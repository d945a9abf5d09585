"""Fixtures for scores: the run fixtures (make_run, make_harness) are in
tests/helpers/run_fixtures.py."""

import pytest

from tests.helpers.run_fixtures import fast_hashing


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    fast_hashing(settings)
