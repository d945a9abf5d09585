"""The platform refuses to launch runs while sandbox isolation is not in place, and says why
to the caller (503), to operators (admin banner, system check) and in the log."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.core import checks

from belvedir import isolation
from runs.models import Run

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def isolated_status(settings, tmp_path):
    """Checks in this test write their status file under tmp_path, not the machine's."""
    settings.BELVEDIR_SANDBOX_DATA_DIR = str(tmp_path / "sandboxes")
    return settings


def launch_over_api(owner, harness):
    return owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")


def test_launch_is_refused_with_a_503_naming_the_missing_network(
    owner, make_harness, isolated_status
):
    harness = make_harness()
    isolated_status.BELVEDIR_SANDBOX_NETWORK = "belvedir-test-missing-network"

    response = launch_over_api(owner, harness)

    assert response.status_code == 503
    assert response.json()["detail"].startswith(
        "sandbox isolation is not in place: the Docker network belvedir-test-missing-network "
        "does not exist"
    )
    assert not Run.objects.exists()


def test_a_refused_launch_is_not_counted_and_launches_work_again_once_isolation_is_back(
    owner, make_harness, isolated_status, django_capture_on_commit_callbacks
):
    harness = make_harness()
    isolated_status.BELVEDIR_SANDBOX_NETWORK = "belvedir-test-missing-network"
    assert launch_over_api(owner, harness).status_code == 503

    isolated_status.BELVEDIR_SANDBOX_NETWORK = "belvedir-sandbox"
    with django_capture_on_commit_callbacks(execute=False):
        response = launch_over_api(owner, harness)

    assert response.status_code == 201, response.content
    assert Run.objects.count() == 1


def test_launch_is_refused_when_the_firewall_rules_are_not_those_of_the_configured_network(
    owner, make_harness, isolated_status
):
    isolated_status.BELVEDIR_SANDBOX_PORTS = "18800:18899"  # rules installed for 18700:18799

    response = launch_over_api(owner, make_harness())

    assert response.status_code == 503
    assert (
        "BELVEDIR-SANDBOX-IN does not hold the belvedir-sandbox rules" in response.json()["detail"]
    )


def test_launch_is_refused_when_the_engine_lacks_the_configured_runtime(
    owner, make_harness, isolated_status
):
    isolated_status.BELVEDIR_SANDBOX_RUNTIME = "runsc-not-registered"

    response = launch_over_api(owner, make_harness())

    assert response.status_code == 503
    assert "the Docker engine has no 'runsc-not-registered' runtime" in response.json()["detail"]


def test_launch_is_refused_while_the_workers_disk_is_below_the_free_space_threshold(
    owner, make_harness, isolated_status
):
    isolated_status.BELVEDIR_MIN_FREE_DISK = 2**60

    response = launch_over_api(owner, make_harness())

    assert response.status_code == 503
    assert "below the" in response.json()["detail"]
    assert "BELVEDIR_MIN_FREE_DISK" in response.json()["detail"]


def test_runc_and_the_host_network_flag_are_warnings_not_refusals(isolated_status):
    isolated_status.BELVEDIR_SANDBOX_RUNTIME = "runc"
    isolated_status.BELVEDIR_SANDBOX_HOST_NETWORK = True

    status = isolation.isolation_status(refresh=True)

    assert status.ok
    assert status.warnings == [isolation.HOST_NETWORK_WARNING, isolation.RUNC_WARNING]


def test_the_default_configuration_of_this_machine_is_isolated(isolated_status):
    status = isolation.isolation_status(refresh=True)

    assert status.problems == []
    assert status.warnings == []


def test_operators_see_the_reason_on_the_admin_index(superuser, isolated_status):
    isolated_status.BELVEDIR_SANDBOX_NETWORK = "belvedir-test-missing-network"

    page = superuser.get("/admin/").content.decode()

    assert 'id="sandbox-isolation"' in page
    assert (
        "Sandbox isolation is not in place: the Docker network belvedir-test-missing-network"
        in page
    )


def test_operators_see_a_warning_on_the_admin_index_under_runc(superuser, isolated_status):
    isolated_status.BELVEDIR_SANDBOX_RUNTIME = "runc"

    page = superuser.get("/admin/").content.decode()

    assert 'id="sandbox-isolation"' not in page
    assert "sandboxes run under runc, not gVisor" in page


def test_the_system_check_warns_at_start_up_and_the_log_says_launches_are_refused(
    isolated_status, caplog
):
    isolated_status.BELVEDIR_SANDBOX_NETWORK = "belvedir-test-missing-network"

    found = checks.run_checks(tags=["sandbox"])

    assert [m.id for m in found] == ["runs.W001"]
    assert "belvedir-test-missing-network does not exist" in found[0].msg
    assert any(
        r.levelname == "ERROR" and "launches are refused" in r.getMessage() for r in caplog.records
    )


def _status_as_nobody(data_dir: Path) -> dict:
    """isolation_status() in a process of uid 65534, which cannot read the firewall.

    It starts as this test's user and imports Django and the code first, then becomes uid and
    gid 65534 (no groups, and so no capabilities) before it asks: the checkout may sit in a
    folder only root can enter (a `mktemp -d` clone, /root/...), which uid 65534 could not
    import from."""
    program = (
        "import django, json, os; django.setup();"
        "from belvedir.isolation import isolation_status;"
        "os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534);"
        "assert os.geteuid() == 65534;"
        "s = isolation_status(); print(json.dumps({'problems': s.problems}))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        "BELVEDIR_SANDBOX_DATA_DIR": str(data_dir),
    }
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def world_readable_dir():
    """A folder uid 65534 can reach (pytest's tmp_path sits in a root-only folder)."""
    path = Path(tempfile.mkdtemp(prefix="belvedir-isolation-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_process_that_cannot_read_the_firewall_trusts_only_a_fresh_worker_check(
    isolated_status, world_readable_dir
):
    data_dir = world_readable_dir / "sandboxes"
    isolated_status.BELVEDIR_SANDBOX_DATA_DIR = str(data_dir)

    assert "no worker recorded a check" in _status_as_nobody(data_dir)["problems"][0]

    isolation.isolation_status(refresh=True)  # a root worker checks and records it
    assert _status_as_nobody(data_dir)["problems"] == []

    status_file = data_dir.parent / "isolation-status.json"
    recorded = json.loads(status_file.read_text())
    recorded["checked_at"] = time.time() - isolation.STATUS_FRESH_SECONDS - 1
    status_file.write_text(json.dumps(recorded))
    assert "no worker recorded a check" in _status_as_nobody(data_dir)["problems"][0]
