"""The GPU host's start-up check (belvedir.gpu_host, sandboxes.gpu.check_host): it names what is
missing (the driver, nvidia-container-toolkit, the runtime, --nvproxy, a driver nvproxy does not
support) and refuses this host's GPU launches and its GPU cluster with that reason.

No GPU here: the host's probes (driver version, toolkit, device nodes) are faked; the engine's
runtimes and the real runsc's list of supported drivers are asked for real."""

import docker
import pytest
from django.core.management.base import CommandError

from belvedir import gpu_host
from belvedir.isolation import isolation_status
from runs.management.commands.qcluster import Command as Qcluster
from runs.models import GpuDevice, Run
from sandboxes import gpu
from sandboxes.gpu import HostProbes, check_host
from tests.helpers.run_fixtures import TEST_GPU_SHAPE

SUPPORTED = ["535.104.12", "550.54.15"]


def probes(
    *, driver="550.54.15", toolkit=True, devices=1, supported=SUPPORTED, cpus=64, free_gib=4096
) -> HostProbes:
    return HostProbes(
        driver_version=lambda: driver,
        toolkit=lambda: toolkit,
        device_count=lambda: devices,
        supported_drivers=lambda path: supported,
        cpu_count=lambda: cpus,
        free_disk=lambda path: free_gib * 2**30,
    )


NVPROXY = ["/usr/local/bin/runsc", "--nvproxy", "--platform=systrap"]


def check(runtime_command=NVPROXY, runtime="runsc-gpu", wanted=1, **probed):
    return check_host(
        runtime=runtime,
        runtime_command=runtime_command,
        devices_wanted=wanted,
        probes=probes(**probed),
    )


def test_a_host_with_the_driver_the_toolkit_and_runsc_with_nvproxy_is_ready():
    assert check() == gpu.HostCheck(problems=[], warnings=[])
    assert check(["/usr/bin/runsc", "--nvproxy=true"]).problems == []


def test_each_missing_piece_is_named():
    (missing,) = check(driver=None).problems
    assert "the NVIDIA driver is not loaded" in missing
    assert "/proc/driver/nvidia/version" in missing
    (missing,) = check(toolkit=False).problems
    assert "nvidia-container-toolkit is not installed" in missing
    assert "nvidia-container-runtime-hook" in missing
    (missing,) = check(runtime_command=None).problems
    assert "the Docker engine has no 'runsc-gpu' runtime (BELVEDIR_GPU_RUNTIME)" in missing
    assert "runsc install --runtime=runsc-gpu -- --nvproxy" in missing
    (missing,) = check(devices=1, wanted=2).problems
    assert "gives this host 2 GPU(s) but it has 1" in missing
    everything = check(driver=None, toolkit=False, runtime_command=None).problems
    assert len(everything) == 3


@pytest.mark.docker
def test_a_shape_asking_more_cpus_than_the_host_has_is_refused_naming_the_setting(gpu_host_here):
    found = gpu_host_here(cpus=4).problems  # the default A10G shape asks for 8
    (refused,) = [p for p in found if "CPUs" in p]
    assert "the A10G shape asks for 8 CPUs but this host has 4" in refused
    assert "BELVEDIR_GPU_SHAPES=a10g:cpus=4" in refused
    assert not [p for p in gpu_host_here(cpus=8).problems if "CPUs" in p]


@pytest.mark.docker
def test_a_shape_whose_disk_does_not_fit_the_free_disk_is_refused(gpu_host_here, settings):
    settings.BELVEDIR_SANDBOX_DISK = 10 * 2**30
    settings.BELVEDIR_MIN_FREE_DISK = 2 * 2**30
    found = gpu_host_here(free_gib=101).problems  # the A10G's 100 GiB and 2 GiB kept free
    (refused,) = [p for p in found if "disk" in p]
    assert "the A10G shape's 100 GiB disk does not fit this host's 101 GiB free" in refused
    assert "BELVEDIR_GPU_SHAPES=a10g:disk=" in refused
    assert not [p for p in gpu_host_here(free_gib=102).problems if "disk" in p]
    settings.BELVEDIR_SANDBOX_DISK = 0  # no quota volumes: nothing to fit
    assert not [p for p in gpu_host_here(free_gib=1).problems if "disk" in p]


def test_gvisor_without_nvproxy_is_refused_naming_its_arguments():
    (missing,) = check(["/usr/bin/runsc", "--platform=ptrace"], runtime="runsc").problems
    assert "runs gVisor without --nvproxy (its runtimeArgs: --platform=ptrace)" in missing


def test_a_driver_version_nvproxy_does_not_support_is_refused_naming_it():
    (unsupported,) = check(driver="470.82.01").problems
    assert "the NVIDIA driver 470.82.01 is not one this gVisor's nvproxy supports" in unsupported
    assert "550.54.15" in unsupported
    (unknown,) = check(supported=None).problems
    assert "runsc nvproxy list-supported-drivers" in unknown


def test_a_driver_abi_the_operator_forces_on_runsc_is_a_warning_not_a_refusal():
    forced = [*NVPROXY, "--nvproxy-driver-version=550.54.15"]
    found = check(forced, driver="550.90.12")
    assert found.problems == []
    (warning,) = found.warnings
    assert "550.90.12 is not one this gVisor's nvproxy supports" in warning
    assert "--nvproxy-driver-version=550.54.15" in warning


def test_runc_and_nvidias_runtime_pass_with_the_isolation_warning():
    for command in (["runc"], ["/usr/bin/nvidia-container-runtime"]):
        found = check(command, runtime=command[0].rsplit("/", 1)[-1], supported=None)
        assert found.problems == []
        (warning,) = found.warnings
        assert "not gVisor" in warning and "reaches the host" in warning


@pytest.mark.docker
def test_the_real_runsc_lists_the_drivers_it_supports():
    """This machine's gVisor answers `runsc nvproxy list-supported-drivers` (no GPU needed)."""
    runsc = gpu_host.get_backend().runtime_command("runsc")
    assert runsc is not None and gpu.runtime_kind(runsc) == "runsc"
    supported = gpu.REAL_PROBES.supported_drivers(runsc[0])
    assert supported and all(v.count(".") >= 1 for v in supported)


@pytest.fixture
def gpu_host_here(settings, monkeypatch):
    """This host has an A10G (not simulated), its GPU runtime the engine's real runsc."""
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    settings.BELVEDIR_GPU_SIMULATE = False
    settings.BELVEDIR_GPU_RUNTIME = "runsc"

    def given(**probed):
        monkeypatch.setattr(gpu_host, "PROBES", probes(**probed))
        return gpu_host.gpu_host_check(refresh=True)

    return given


@pytest.mark.docker
def test_the_engines_runsc_without_nvproxy_is_what_this_host_lacks(gpu_host_here):
    runsc = gpu_host.get_backend().runtime_command("runsc")
    supported = gpu.REAL_PROBES.supported_drivers(runsc[0])
    found = gpu_host_here(driver=supported[0], supported=supported)  # runsc's own list
    assert len(found.problems) == 1
    assert "'runsc' runtime runs gVisor without --nvproxy" in found.problems[0]


@pytest.mark.docker
def test_the_engines_runsc_gpu_has_nvproxy_and_a_host_without_a_gpu_names_what_it_lacks(
    settings, monkeypatch
):
    """scripts/ensure-docker.sh registers runsc-gpu (BELVEDIR_GPU_RUNTIME's default) on every
    host: on this one, with no NVIDIA driver, the real check still names the driver and the
    toolkit, and finds nothing wrong with the runtime."""
    runsc_gpu = gpu_host.get_backend().runtime_command("runsc-gpu")
    assert runsc_gpu is not None and "--nvproxy=true" in runsc_gpu
    assert runsc_gpu[0] == gpu_host.get_backend().runtime_command("runsc")[0]
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    settings.BELVEDIR_GPU_SIMULATE = False
    settings.BELVEDIR_GPU_RUNTIME = "runsc-gpu"
    settings.BELVEDIR_GPU_SHAPES = gpu.parse_shapes(TEST_GPU_SHAPE)  # fits this machine
    monkeypatch.setattr(gpu_host, "PROBES", gpu.REAL_PROBES)
    if gpu.DRIVER_VERSION_FILE.exists():
        # The premise is a host without the driver (every machine of this project); on a GPU
        # host, `manage.py gpu_check` is the test of the real probes.
        pytest.skip("this host has the NVIDIA driver: `manage.py gpu_check` tests it instead")

    problems = gpu_host.gpu_host_check(refresh=True).problems

    assert any("the NVIDIA driver is not loaded" in p for p in problems), problems
    assert any("nvidia-container-toolkit is not installed" in p for p in problems), problems
    assert not [p for p in problems if "'runsc-gpu' runtime" in p or "nvproxy" in p], problems


@pytest.mark.docker
def test_a_docker_engine_starts_with_the_gpu_runtime_registered(engine_b):
    """The second engine's configuration is scripts/runsc-runtimes.py's, as the main one's
    daemon.json: a dockerd starts with runsc-gpu registered, and lists it."""
    client = docker.DockerClient(base_url=engine_b)
    try:
        runtimes = client.info()["Runtimes"]
    finally:
        client.close()
    assert runtimes["runsc-gpu"]["runtimeArgs"][-1] == "--nvproxy=true"
    assert runtimes["runsc-gpu"]["path"] == runtimes["runsc"]["path"]


@pytest.mark.docker
@pytest.mark.django_db
def test_a_gpu_launch_on_a_host_without_the_driver_is_refused_with_the_reason(
    owner, make_harness, gpu_host_here
):
    gpu_host_here(driver=None)
    harness = make_harness(compute="gpu", gpu_type="A10G")
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 503, response.content
    body = response.content.decode()
    assert "GPU sandboxes cannot start on this host (A10G)" in body
    assert "the NVIDIA driver is not loaded" in body
    assert not Run.objects.exists()
    # A CPU harness still launches past the GPU check (whatever else it meets).
    cpu = owner.api.post("/api/v1/runs", {"harness": make_harness("cpu").pk}, format="json")
    assert "GPU sandboxes" not in cpu.content.decode()


@pytest.mark.django_db
def test_a_gpu_launch_of_a_type_another_host_serves_is_not_refused_for_this_hosts_gpu(
    gpu_host_here, settings
):
    gpu_host_here(toolkit=False)
    assert gpu_host.gpu_problems("A10G")
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1, "L4": 1}
    assert gpu_host.gpu_problems("A100") == []  # not this host's: its own worker checks it


@pytest.mark.docker
@pytest.mark.django_db
def test_a_gpu_cluster_on_a_host_without_the_toolkit_refuses_to_serve(gpu_host_here):
    gpu_host_here(toolkit=False)
    with pytest.raises(CommandError) as refused:
        Qcluster().serve_gpu("A10G")
    assert "nvidia-container-toolkit is not installed" in str(refused.value)
    assert not GpuDevice.objects.exists()  # no device of it is offered to runs


@pytest.mark.docker
def test_a_gpu_run_finds_its_hosts_gpu_problems_before_it_starts(gpu_host_here):
    gpu_host_here(driver="470.82.01")
    status = gpu_host.sandbox_status("A10G")
    assert not status.ok
    assert "the NVIDIA driver 470.82.01 is not one" in status.problems[-1]
    assert gpu_host.sandbox_status("").problems == isolation_status().problems  # a CPU run


def test_a_simulated_gpu_host_has_nothing_to_check(gpu_host_here, settings):
    settings.BELVEDIR_GPU_SIMULATE = True
    assert gpu_host_here(driver=None, toolkit=False) == gpu.HostCheck()


@pytest.mark.docker
@pytest.mark.django_db
def test_the_admin_shows_the_gpu_hosts_problems(gpu_host_here, admin_client):
    gpu_host_here(toolkit=False)
    page = admin_client.get("/admin/").content.decode()
    assert "GPU sandboxes cannot start on this host" in page
    assert "nvidia-container-toolkit is not installed" in page


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)  # the executor closes its connections
def test_a_gpu_run_reaching_a_host_whose_driver_went_away_starts_no_sandbox(
    gpu_host_here, make_run, settings
):
    from runs import executor
    from sandboxes.labels import LABEL_RUN_ID

    settings.BELVEDIR_INSTANCE = "test-gpu-host-check"
    gpu_host_here(driver=None)
    run = make_run(status="queued", gpu_type="A10G")
    assert executor.execute_run(run.pk) == "failed"
    run.refresh_from_db()
    assert "GPU sandboxes cannot start on this host (A10G)" in run.notes[0]
    assert "the NVIDIA driver is not loaded" in run.notes[0] and run.platform_failed
    assert run.container_id == ""  # no sandbox was made for it
    assert not gpu_host.get_backend().list_by_label({LABEL_RUN_ID: run.pk})
    assert not GpuDevice.objects.filter(run_id=run.pk).exists()  # its device is free again


@pytest.mark.docker
@pytest.mark.django_db
def test_the_admin_warns_of_gpu_sandboxes_under_runc_as_it_does_for_cpu_ones(
    gpu_host_here, admin_client, settings
):
    settings.BELVEDIR_GPU_RUNTIME = "runc"  # the engine's own runc
    assert gpu_host_here(supported=None).problems == []
    page = admin_client.get("/admin/").content.decode()
    assert (
        "Sandbox isolation: GPU sandboxes run under runc (BELVEDIR_GPU_RUNTIME), not gVisor" in page
    )
    assert "GPU sandboxes cannot start" not in page
