"""GPU runs: refused where no worker serves their GPU type; otherwise queued on their type's
django-q2 queue, run one at a time per device by a GPU worker host's cluster (simulated here:
BELVEDIR_GPU_SIMULATE=1 claims devices but requests none), while CPU runs go on at once."""

import dataclasses
import os
import signal
import uuid
from datetime import timedelta

import docker
import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django_q.models import OrmQ

from belvedir.env import envgpus
from belvedir.gpu_host import gpu_sandbox
from belvedir.sandbox_config import get_backend, spec_from_settings
from runs import gpu, reaper
from runs.models import GpuDevice, Run
from runs.queue import runs_with_queued_tasks
from runs.services import run_cancel, run_enqueue
from sandboxes.base import SandboxHandle
from sandboxes.gpu import parse_shapes
from tests.helpers.run_fixtures import worker_env
from tests.runs.helpers import containers_of, start_qcluster, stop_qcluster, wait_for


def test_gpu_types_parse_with_counts_and_name_the_variable_when_wrong(monkeypatch):
    monkeypatch.setenv("BELVEDIR_GPU_TYPES", " a10g:1, A100:2 ")
    assert envgpus("BELVEDIR_GPU_TYPES") == {"A10G": 1, "A100": 2}
    monkeypatch.delenv("BELVEDIR_GPU_TYPES")
    assert envgpus("BELVEDIR_GPU_TYPES") == {}
    for wrong in ["a10g", "a10g:0", "a10g:x", "a10g:1,a10g:2", ":1", "a10g:1;l4:1"]:
        monkeypatch.setenv("BELVEDIR_GPU_TYPES", wrong)
        with pytest.raises(ImproperlyConfigured, match="BELVEDIR_GPU_TYPES"):
            envgpus("BELVEDIR_GPU_TYPES")


def test_device_ids_follow_the_order_of_the_types(settings):
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1, "A100": 2}
    assert gpu.host_devices() == {"A10G": ["0"], "A100": ["1", "2"]}
    assert gpu.waiting_for("A10G") == "waiting for an A10G worker"
    assert gpu.queue_name("A10G") == "gpu-a10g" and gpu.queue_gpu_type("gpu-a10g") == "A10G"
    assert gpu.queue_gpu_type("runs") is None


def test_a_gpu_run_of_a_type_no_worker_serves_is_refused_naming_the_type(
    owner, make_harness, settings
):
    settings.BELVEDIR_GPU_TYPES = {"A100": 1}
    harness = make_harness(compute="gpu", gpu_type="A10G")
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 400
    message = response.json()["harness"][0]
    assert "no GPU workers of type A10G" in message and "GPU types served: A100" in message
    assert not Run.objects.exists()


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_gpu_runs_go_to_their_types_queue_and_cpu_runs_to_the_runs_queue(
    owner, make_harness, gpu_settings
):
    gpu_harness = make_harness("gpu", compute="gpu", gpu_type="A10G")
    gpu_run = owner.api.post("/api/v1/runs", {"harness": gpu_harness.pk}, format="json").json()
    cpu_run = owner.api.post("/api/v1/runs", {"harness": make_harness().pk}, format="json").json()
    assert gpu_run["gpu_type"] == "A10G" and cpu_run["gpu_type"] == ""
    assert gpu_run["waiting_for"] == "waiting for an A10G worker"
    assert cpu_run["waiting_for"] == ""
    # Each queue counts its own: neither waits behind the other.
    assert gpu_run["queue_position"] == 1 and cpu_run["queue_position"] == 1
    queues = {row.task["args"][0]: row.key for row in OrmQ.objects.all()}
    assert queues == {gpu_run["id"]: "gpu-a10g", cpu_run["id"]: "runs"}


@pytest.mark.docker
def test_a_gpu_sandbox_requests_exactly_its_one_device_by_id_in_its_types_shape(settings):
    """What Docker is asked for (the container created, not started: no GPU here)."""
    settings.BELVEDIR_GPU_SIMULATE = False
    settings.BELVEDIR_GPU_RUNTIME = "runsc"  # this engine's; a GPU host's has --nvproxy
    settings.BELVEDIR_GPU_SHAPES = parse_shapes("l4:cpus=1.5,memory=3g,shm=2g")
    backend = get_backend()
    spec = spec_from_settings(
        run_id=f"gpu-{uuid.uuid4().hex[:8]}", command=["true"], **gpu_sandbox("L4", "1")
    )
    spec = dataclasses.replace(spec, disk_bytes=None)
    handle = backend._create(spec, f"belvedir-test-{spec.run_id}", {})
    try:
        client = docker.from_env()
        host = client.api.inspect_container(handle.id)["HostConfig"]
        requests = host["DeviceRequests"]
        assert len(requests) == 1
        assert requests[0]["DeviceIDs"] == ["1"] and requests[0]["Count"] == 0
        # The GPU, with CUDA and nvidia-smi mounted in by nvidia-container-toolkit.
        assert requests[0]["Capabilities"] == [["gpu", "compute", "utility"]]
        assert host["ShmSize"] == 2 * 2**30
        assert host["NanoCpus"] == 1_500_000_000 and host["Memory"] == 3 * 2**30
        assert host["Runtime"] == "runsc"
        plain = backend._create(
            spec_from_settings(run_id=spec.run_id + "c", command=["true"], disk_bytes=None),
            f"belvedir-test-{spec.run_id}c",
            {},
        )
        plain_host = client.api.inspect_container(plain.id)["HostConfig"]
        assert not plain_host["DeviceRequests"]
        assert plain_host["ShmSize"] == 64 * 2**20  # Docker's default: CPU sandboxes keep it
        backend.remove(plain)
    finally:
        backend.remove(SandboxHandle(id=handle.id, run_id=spec.run_id))


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_killed_workers_device_is_freed_by_lease_expiry_and_the_reaper(
    owner, make_run, gpu_settings, settings
):
    settings.BELVEDIR_INSTANCE = f"test-{uuid.uuid4().hex[:8]}"  # reap only this test's
    long_ago = timezone.now() - timedelta(hours=1)
    lost = make_run(status="running", gpu_type="A10G", heartbeat_at=long_ago)
    waiting = make_run(status="queued", gpu_type="A10G")
    device = gpu.device_claim(run_id=lost.pk, gpu_type="A10G")
    assert device is not None and device.device_id == "0"
    assert gpu.device_claim(run_id=waiting.pk, gpu_type="A10G") is None  # held
    # The worker was killed: no heartbeat renews the lease, which runs out.
    GpuDevice.objects.filter(pk=device.pk).update(held_at=long_ago)
    reaper.reap()
    assert Run.objects.get(pk=lost.pk).status == "failed"
    assert GpuDevice.objects.get(pk=device.pk).run is None
    assert gpu.device_claim(run_id=waiting.pk, gpu_type="A10G").pk == device.pk
    # An expired lease is free to claim even before the reaper passes.
    GpuDevice.objects.filter(pk=device.pk).update(held_at=long_ago)
    other = make_run(status="queued", gpu_type="A10G")
    assert gpu.device_claim(run_id=other.pk, gpu_type="A10G").pk == device.pk


def _get(owner, run_id: str) -> dict:
    return owner.api.get(f"/api/v1/runs/{run_id}").json()


def _finished(run_id: str, what: str, log=None) -> Run:
    return wait_for(
        lambda: (r := Run.objects.get(pk=run_id)).is_terminal and r,
        120,
        what,
        every=0.5,
        on_timeout=lambda: log.read_text()[-3000:] if log else "",
    )


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_simulated_gpu_run_runs_on_a_gpu_worker_and_frees_its_device(
    gpu_cluster, owner, make_harness
):
    harness = make_harness("gpu", compute="gpu", gpu_type="A10G")
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    run = _finished(run_id, "the GPU run to finish", gpu_cluster)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == pytest.approx(0.85)
    assert run.gpu_device == f"{gpu.worker_host()}/0"
    assert _get(owner, run_id)["gpu_device"] == run.gpu_device
    # Released once the sandbox is removed, just after the run's end is recorded.
    wait_for(lambda: GpuDevice.objects.get(device_id="0").run is None, 30, "the device's release")
    assert "Serving A10G GPU runs" in gpu_cluster.read_text()


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_two_gpu_runs_share_one_device_in_turn_while_a_cpu_run_starts_at_once(
    gpu_cluster, cluster, owner, make_harness
):
    long_gpu = make_harness("gpu long", compute="gpu", gpu_type="A10G", env={"SLEEP": "600"})
    short_gpu = make_harness("gpu short", compute="gpu", gpu_type="A10G")
    first = owner.api.post("/api/v1/runs", {"harness": long_gpu.pk}, format="json").json()["id"]
    wait_for(
        lambda: Run.objects.get(pk=first).stage == "running",
        120,
        "the first GPU run to be running",
        every=0.5,
        on_timeout=lambda: gpu_cluster.read_text()[-3000:],
    )
    second = owner.api.post("/api/v1/runs", {"harness": short_gpu.pk}, format="json").json()["id"]
    waiting = _get(owner, second)
    assert waiting["status"] == "queued" and waiting["queue_position"] == 1
    assert waiting["waiting_for"] == "waiting for an A10G worker"
    page = owner.web.get(f"/runs/{second}/").content.decode()
    assert "waiting for an A10G worker" in page

    cpu = owner.api.post("/api/v1/runs", {"harness": make_harness().pk}, format="json").json()
    cpu_run = _finished(cpu["id"], "the CPU run to finish", cluster)
    assert cpu_run.status == "succeeded", (cpu_run.notes, cpu_run.log_tail)
    # The CPU run started and ended while the device was taken and the second GPU run waited.
    assert Run.objects.get(pk=first).status == "running"
    assert Run.objects.get(pk=second).status == "queued"
    assert _get(owner, second)["waiting_for"] == "waiting for an A10G worker"

    run_cancel(run=Run.objects.get(pk=first))  # frees the device: the second run goes next
    done = _finished(second, "the second GPU run to finish", gpu_cluster)
    first_run = Run.objects.get(pk=first)
    assert done.status == "succeeded", (done.notes, done.log_tail)
    assert first_run.status == "cancelled"
    assert done.started_at >= first_run.finished_at  # one after the other, never together
    assert cpu_run.started_at < first_run.finished_at
    assert done.gpu_device == first_run.gpu_device == f"{gpu.worker_host()}/0"
    wait_for(lambda: GpuDevice.objects.get(device_id="0").run is None, 30, "the device's release")


@pytest.mark.django_db(transaction=True)
def test_a_lost_gpu_task_is_found_on_its_queue_before_the_reaper_requeues(
    owner, make_run, gpu_settings, settings
):
    settings.BELVEDIR_QUEUED_STALE = 5
    old = timezone.now() - timedelta(minutes=5)
    queued = make_run(status="queued", gpu_type="A10G", enqueued_at=old)
    run_enqueue(run_id=queued.pk)
    assert OrmQ.objects.get().key == "gpu-a10g"
    assert runs_with_queued_tasks([queued.pk], ["gpu-a10g"]) == {queued.pk}
    assert runs_with_queued_tasks([queued.pk]) == set()


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_killed_gpu_workers_device_goes_to_the_next_run_after_the_reaper(
    sandbox_settings, gpu_settings, owner, make_harness, tmp_path
):
    gpu_settings.BELVEDIR_HEARTBEAT_STALE = 5  # the reaper's (this process's) view of a lost run
    harness = make_harness("gpu long", compute="gpu", gpu_type="A10G", env={"SLEEP": "600"})
    worker = start_qcluster("gpu-a10g", tmp_path / "w1.log", **worker_env(sandbox_settings))
    try:
        first = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json").json()["id"]
        wait_for(lambda: Run.objects.get(pk=first).stage == "running", 120, "the run to run")
        os.killpg(worker.pid, signal.SIGKILL)  # the worker host dies mid-run
    finally:
        stop_qcluster(worker)
    assert GpuDevice.objects.get(device_id="0").run_id == first  # nobody released it
    wait_for(
        lambda: reaper.reap() and Run.objects.get(pk=first).status == "failed",
        60,
        "the reaper to fail the lost run",
        every=1,
    )
    assert GpuDevice.objects.get(device_id="0").run is None
    assert containers_of(first) == []

    worker = start_qcluster("gpu-a10g", tmp_path / "w2.log", **worker_env(sandbox_settings))
    try:
        short = make_harness("gpu short", compute="gpu", gpu_type="A10G")
        second = owner.api.post("/api/v1/runs", {"harness": short.pk}, format="json").json()["id"]
        done = _finished(second, "the next GPU run to finish", tmp_path / "w2.log")
    finally:
        stop_qcluster(worker)
    assert done.status == "succeeded", (done.notes, done.log_tail)
    assert done.gpu_device == Run.objects.get(pk=first).gpu_device


def test_a_gpu_type_no_harness_can_ask_for_fails_the_system_check(settings):
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1, "T4": 1}
    errors = [m for m in run_checks() if m.id == "harnesses.E001"]
    assert len(errors) == 1 and "BELVEDIR_GPU_TYPES names T4" in errors[0].msg
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    assert not [m for m in run_checks() if m.id == "harnesses.E001"]


@pytest.mark.django_db
def test_a_run_delivered_twice_holds_one_device_which_the_second_delivery_never_frees(
    owner, make_run, gpu_settings
):
    from runs import executor

    gpu_settings.BELVEDIR_GPU_TYPES = {"A10G": 2}
    run = make_run(status="queued", gpu_type="A10G")
    first = gpu.device_claim(run_id=run.pk, gpu_type="A10G")
    assert first is not None
    # The same task delivered again (the reaper requeued it): that worker gets no device
    # (it used to get the first worker's back, and free it when its own claim failed).
    assert gpu.device_claim(run_id=run.pk, gpu_type="A10G") is None
    Run.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now())
    assert executor.execute_run(run.pk) == "not claimed"
    gpu.device_release(run_id=run.pk, device_pk=first.pk + 1000)  # not the one it holds
    assert GpuDevice.objects.get(pk=first.pk).run_id == run.pk
    assert GpuDevice.objects.filter(run_id=run.pk).count() == 1
    # A hold whose lease lapsed (its worker was killed) is dropped when the run claims again.
    Run.objects.filter(pk=run.pk).update(status="queued")
    GpuDevice.objects.filter(pk=first.pk).update(held_at=timezone.now() - timedelta(hours=1))
    again = gpu.device_claim(run_id=run.pk, gpu_type="A10G")
    assert again is not None
    assert list(GpuDevice.objects.filter(run_id=run.pk).values_list("pk", flat=True)) == [again.pk]


@pytest.mark.django_db
def test_a_gpu_run_whose_preparation_fails_ends_failed_and_frees_its_device(
    owner, make_run, gpu_settings, monkeypatch
):
    from runs import executor

    run = make_run(status="queued", gpu_type="A10G")

    def broken(run):
        raise RuntimeError("the Hugging Face token cannot be decrypted")

    monkeypatch.setattr(executor, "run_secret_values", broken)
    assert executor.execute_run(run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and "internal error while preparing" in run.notes[0]
    assert not GpuDevice.objects.filter(run_id=run.pk).exists()


@pytest.mark.django_db
def test_a_gpu_runs_spec_has_its_types_shape_and_the_gpu_image_a_cpu_runs_has_neither(
    make_run, gpu_settings, contract_repo, tmp_path
):
    from runs.executor import Execution

    gpu_settings.BELVEDIR_GPU_IMAGE = "belvedir-sandbox-gpu:latest"
    snapshot = {"repo_url": contract_repo, "run_command": "python3 run.py"}
    run = make_run(status="running", gpu_type="A10G", harness_snapshot=snapshot)
    device = gpu.device_claim(run_id=run.pk, gpu_type="A10G")
    (tmp_path / "gpu").mkdir()
    spec = Execution(run, get_backend(), device=device).prepare(tmp_path / "gpu")
    shape = gpu_settings.BELVEDIR_GPU_SHAPES["A10G"]
    assert spec.image == "belvedir-sandbox-gpu:latest"
    assert (spec.cpus, spec.memory, spec.shm_bytes) == (shape.cpus, shape.memory, shape.shm_bytes)
    assert spec.gpu_device == ""  # simulated: claimed, not requested
    cpu = make_run(status="running", harness_snapshot=snapshot)
    (tmp_path / "cpu").mkdir()
    plain = Execution(cpu, get_backend()).prepare(tmp_path / "cpu")
    assert plain.image == gpu_settings.BELVEDIR_SANDBOX_IMAGE and plain.shm_bytes is None
    assert plain.cpus == float(gpu_settings.BELVEDIR_SANDBOX_CPUS)
