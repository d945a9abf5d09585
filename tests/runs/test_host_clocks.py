"""Several worker hosts whose clocks differ: a heartbeat, a GPU lease and a host's report are
stamped and judged on the database's clock, so a host whose clock runs ahead never takes the
other hosts' fresh ones for stale (failing their runs, handing out their GPU devices, refusing
launches because no worker host seems ready)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs import gpu, hosts, reaper, services
from runs.models import GpuDevice, Run, WorkerHost

pytestmark = pytest.mark.django_db
AHEAD = timedelta(minutes=5)  # this host's clock, against the other host's


class NoSandboxes:
    """This host's engine, holding no sandboxes (what the reaper removes is not tested here)."""

    def list_by_label(self, label_filter=None):
        return []

    def sweep_volumes(self):
        return []

    def sweep_warm(self):
        return []

    def sweep_install_cache(self, keep):
        return []

    def sweep_gone_instances(self):
        return []


@pytest.fixture
def clock_ahead(monkeypatch):
    """Call it to move this process's clock AHEAD: what it writes and judges from then on is
    another host's view, with the database's clock where it was."""
    monkeypatch.setattr(reaper, "get_backend", NoSandboxes)
    real = timezone.now

    def move():
        monkeypatch.setattr(timezone, "now", lambda: real() + AHEAD)

    return move


def test_a_host_whose_clock_runs_ahead_leaves_another_hosts_running_run_alone(
    make_run, gpu_settings, clock_ahead
):
    run = make_run(status="queued", gpu_type="A10G")
    device = gpu.device_claim(run_id=run.pk, gpu_type="A10G")  # host B, its clock right
    assert services.run_claim(run_id=run.pk, worker="host-b", engine="host-b x")
    assert services.run_heartbeat(run_id=run.pk)
    gpu.device_renew(run_id=run.pk)

    clock_ahead()  # host A reaps
    assert reaper.reap()["failed"] == []
    assert Run.objects.get(pk=run.pk).status == "running"
    assert GpuDevice.objects.get(pk=device.pk).run_id == run.pk
    other = make_run(status="queued", gpu_type="A10G")
    assert gpu.device_claim(run_id=other.pk, gpu_type="A10G") is None  # still held


def test_a_web_host_whose_clock_runs_ahead_sees_a_worker_host_that_just_reported(
    settings, clock_ahead
):
    settings.BELVEDIR_WORKER_HOST = "host-b"
    WorkerHost.objects.all().delete()
    WorkerHost.objects.create(name="host-b", engine="host-b x")
    hosts.WorkerHost.objects.filter(name="host-b").update(seen_at=timezone.now())
    clock_ahead()  # the web
    assert [host.name for host in hosts.hosts_ready()] == ["host-b"]
