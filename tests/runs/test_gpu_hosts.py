"""GPU devices on several worker hosts: a worker claims a device of its own host only, so a
run never gets another host's GPU id (which its engine would not have, or would hand to a
sandbox while that host's own worker holds it), and a host serving other GPU types claims none."""

import pytest

from runs import gpu
from runs.models import GpuDevice

pytestmark = pytest.mark.django_db


def test_a_worker_claims_a_device_of_its_own_host_only(make_run, gpu_settings, settings):
    settings.BELVEDIR_WORKER_HOST = "host-a"
    on_a = make_run(status="queued", gpu_type="A10G")
    device_a = gpu.device_claim(run_id=on_a.pk, gpu_type="A10G")
    assert (device_a.host, device_a.device_id) == ("host-a", "0")

    settings.BELVEDIR_WORKER_HOST = "host-b"  # one A10G too, also device id "0" there
    on_b = make_run(status="queued", gpu_type="A10G")
    device_b = gpu.device_claim(run_id=on_b.pk, gpu_type="A10G")
    assert (device_b.host, device_b.device_id) == ("host-b", "0")

    gpu.device_release(run_id=on_a.pk)  # host A's device is free now, host B's is held
    waiting = make_run(status="queued", gpu_type="A10G")
    assert gpu.device_claim(run_id=waiting.pk, gpu_type="A10G") is None  # B waits for its own

    settings.BELVEDIR_WORKER_HOST = "host-c"
    settings.BELVEDIR_GPU_TYPES = {"L4": 2}  # host C has no A10G
    assert gpu.device_claim(run_id=waiting.pk, gpu_type="A10G") is None
    assert not GpuDevice.objects.filter(host="host-c", gpu_type="A10G").exists()

    settings.BELVEDIR_WORKER_HOST = "host-a"
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    assert gpu.device_claim(run_id=waiting.pk, gpu_type="A10G").pk == device_a.pk
    assert set(GpuDevice.objects.values_list("host", "run_id")) == {
        ("host-a", waiting.pk),
        ("host-b", on_b.pk),
    }
