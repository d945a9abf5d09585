"""Fixtures for runs: launching runs of the example harness and writing Run rows directly.

The sandbox fixtures (contract_repo, sandbox_settings, make_harness, cluster) are in
tests/helpers/run_fixtures.py; helpers in tests/runs/helpers.py.
"""

import itertools

import pytest

from runs import services

_names = itertools.count(1)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The shared fixtures sign users up; a slow hasher would dominate these tests' setup."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def launch(owner, make_harness, django_capture_on_commit_callbacks):
    """Launch a run of a fresh harness (the enqueue is captured, not sent to a broker).

    `harness` takes extra harness fields (ref, compute, ...).
    """

    def do(env: dict | None = None, tasks: str = "", harness: dict | None = None, **launch_args):
        made = make_harness(
            name=f"contract {next(_names)}", env=env or {}, tasks=tasks, **(harness or {})
        )
        with django_capture_on_commit_callbacks(execute=False):
            return services.run_launch(
                project=owner.project, harness=made, created_by=owner.user, **launch_args
            )

    return do


@pytest.fixture
def make_run(owner):
    """A Run row written directly (no launch, no sandbox), for pages, lists and caps."""
    from runs.models import Run

    def make(project=None, harness=None, **fields):
        project = project or owner.project
        values = {"harness_name": harness.name if harness else "contract", **fields}
        return Run.objects.create(project=project, harness=harness, **values)

    return make
