"""Fixtures for runs: launching runs of the example harness and writing Run rows directly.

The sandbox fixtures (contract_repo, sandbox_settings, make_harness, cluster, make_run) are in
tests/helpers/run_fixtures.py; helpers in tests/runs/helpers.py.
"""

import contextlib
import itertools
import uuid

import docker
import pytest

from belvedir.sandbox_config import get_backend
from runs import services
from sandboxes import diskquota
from sandboxes.base import LABEL_INSTANCE
from tests.helpers.run_fixtures import fast_hashing
from tests.runs.helpers import filling_done

_names = itertools.count(1)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    fast_hashing(settings)


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
def warm_settings(sandbox_settings):
    """A pool of one warm sandbox under gVisor, in an instance of this test's own."""
    sandbox_settings.BELVEDIR_SANDBOX_WARM = 1
    sandbox_settings.BELVEDIR_SANDBOX_RUNTIME = "runsc"
    sandbox_settings.BELVEDIR_INSTANCE = f"warm-test-{uuid.uuid4().hex[:8]}"
    yield sandbox_settings
    filling_done()
    client = docker.from_env()
    backend = get_backend()
    for item in client.api.containers(
        all=True, filters={"label": f"{LABEL_INSTANCE}={sandbox_settings.BELVEDIR_INSTANCE}"}
    ):
        backend.pool.remove(item["Id"])
    client.close()


@pytest.fixture
def own_data_dir(sandbox_settings, tmp_path):
    """A sandbox data dir of this test's own (BELVEDIR_SANDBOX_DATA_DIR): the volumes, spares,
    warm records and heartbeats it sees are its own, not those a host where `make up` (or
    another test session) ran has in the shared one. Request it before `warm_settings`, so
    its volumes are released after that fixture removes its sandboxes."""
    data_dir = tmp_path / "sandboxes"
    sandbox_settings.BELVEDIR_SANDBOX_DATA_DIR = str(data_dir)
    yield data_dir
    for name in diskquota.volume_names(root=data_dir):
        with contextlib.suppress(diskquota.DiskQuotaError):
            diskquota.release(root=data_dir, name=name)


@pytest.fixture
def upstream(settings):
    """A platform that covers model usage (it holds an upstream key), at $2.00 per run."""
    settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-or-operator-upstream"
    settings.BELVEDIR_COVERED_SPEND_CAP_MICROS = 2_000_000
    settings.BELVEDIR_SANDBOX_BASE_URL = "http://172.30.0.1:18700"
    return settings
