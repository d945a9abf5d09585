"""`manage.py gpu_check` against the simulated GPU (BELVEDIR_GPU_SIMULATE=1): a real sandbox of
the A10G shape through the platform's backend under gVisor, without a device, so its table says
nvidia-smi is missing and the command fails; in an image whose nvidia-smi answers as a GPU
host's would (no GPU here to answer for it), every row passes."""

import io
import uuid

import docker
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sandboxes.gpu import parse_shapes
from tests.helpers.run_fixtures import TEST_GPU_SHAPE

FAKE_SMI = """#!/bin/sh
# What nvidia-smi --query-gpu=name,memory.total,driver_version prints on an A10G host.
echo "NVIDIA A10G, 23028, 550.54.15"
"""


@pytest.fixture
def simulated_a10g(settings):
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    settings.BELVEDIR_GPU_SIMULATE = True
    settings.BELVEDIR_GPU_SHAPES = parse_shapes(TEST_GPU_SHAPE)
    settings.BELVEDIR_INSTANCE = f"test-{uuid.uuid4().hex[:8]}"
    return settings


def gpu_check(*args) -> tuple[str, str]:
    out = io.StringIO()
    try:
        call_command("gpu_check", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), ""


def rows(table: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in table.splitlines()[2:]:
        name, _, rest = line.strip().partition("  ")
        mark, _, result = rest.strip().partition("  ")
        found[name.strip()] = (mark.strip(), result.strip())
    return found


def managed_sandboxes(instance: str) -> list:
    return docker.from_env().containers.list(
        all=True, filters={"label": f"belvedir.instance={instance}"}
    )


@pytest.mark.docker
def test_gpu_check_on_the_simulated_gpu_prints_its_table_and_fails_for_want_of_nvidia_smi(
    simulated_a10g,
):
    table, failure = gpu_check()
    assert failure == "GPU check failed: A10G nvidia-smi", table
    found = rows(table)
    assert found["host"] == ("ok", "ready (simulated: BELVEDIR_GPU_SIMULATE=1)")
    assert found["start"][0] == "ok" and "runtime runsc, device none" in found["start"][1]
    assert float(found["start"][1].split(" s ")[0]) < 60
    assert found["nvidia-smi"] == ("FAIL", "nvidia-smi not found in the sandbox")
    assert found["torch CUDA"] == ("-", "torch is not in the image (not checked)")
    assert found["compiler"][0] == "-" and "no C compiler, no Python.h" in found["compiler"][1]
    # The shape's 256m /dev/shm reached the sandbox under gVisor.
    assert found["shared memory"] == ("ok", "/dev/shm 0.2 GiB (shape 0.2 GiB)")
    assert not managed_sandboxes(simulated_a10g.BELVEDIR_INSTANCE)  # removed after


@pytest.mark.docker
def test_gpu_check_passes_in_the_gpu_image_where_nvidia_smi_answers_and_reports_the_device(
    simulated_a10g, tmp_path
):
    (tmp_path / "nvidia-smi").write_text(FAKE_SMI)
    (tmp_path / "nvidia-smi").chmod(0o755)  # COPY keeps the mode
    (tmp_path / "Dockerfile").write_text(
        f"FROM {simulated_a10g.BELVEDIR_SANDBOX_IMAGE}\nCOPY nvidia-smi /usr/local/bin/nvidia-smi\n"
    )
    client = docker.from_env()
    tag = f"belvedir-test-gpu-check:{uuid.uuid4().hex[:8]}"
    client.images.build(path=str(tmp_path), tag=tag, network_mode="none", rm=True)
    simulated_a10g.BELVEDIR_GPU_IMAGE = tag  # the image GPU runs start from
    try:
        table, failure = gpu_check("--type", "a10g")
    finally:
        client.images.remove(tag, force=True)
    assert failure == "", table
    found = rows(table)
    assert found["nvidia-smi"] == ("ok", "NVIDIA A10G, 23028, 550.54.15")
    assert found["devices"] == ("ok", "1 (expected 1)")
    assert found["GPU memory"] == ("ok", "22.5 GiB")
    assert table.rstrip().endswith("GPU check passed.")


def test_gpu_check_on_a_host_without_gpus_says_so(settings):
    settings.BELVEDIR_GPU_TYPES = {}
    with pytest.raises(CommandError, match="BELVEDIR_GPU_TYPES is empty"):
        call_command("gpu_check")
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    with pytest.raises(CommandError, match="gives this host no H100"):
        call_command("gpu_check", "--type", "h100")
