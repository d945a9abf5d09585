"""GPU sandboxes' shapes per type (BELVEDIR_GPU_SHAPES) and what a GPU run's sandbox is made of:
its shape, its device and runtime, none of them under BELVEDIR_GPU_SIMULATE but the shape."""

import os

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envgpushapes
from belvedir.gpu_host import gpu_sandbox
from harnesses.models import GPU_TYPES
from sandboxes.gpu import DEFAULT_SHAPES, GpuShape, parse_shapes, shapes_text

GiB = 2**30


def test_every_gpu_type_of_the_catalog_has_a_default_shape_that_fits_an_8b_model_under_vllm():
    assert set(DEFAULT_SHAPES) == set(GPU_TYPES)
    for kind, shape in DEFAULT_SHAPES.items():
        # 16 GB of bf16 weights loaded through host memory, plus vLLM's 4 GiB swap a GPU.
        assert int(shape.memory[:-1]) >= 32 and shape.memory.endswith("g"), kind
        # vLLM's install (~10 GB, and pip's copy), the weights, an adapter.
        assert shape.disk_bytes >= 100 * GiB, kind
        assert shape.shm_bytes >= 8 * GiB and shape.cpus >= 8, kind
    assert DEFAULT_SHAPES["A10G"] == GpuShape(8, "32g", 100 * GiB, 8 * GiB)
    # The 40/80 GB cards hold a larger KV cache: more requests to feed at once.
    assert DEFAULT_SHAPES["H100"].cpus > DEFAULT_SHAPES["L4"].cpus
    assert DEFAULT_SHAPES["A100"].shm_bytes > DEFAULT_SHAPES["A10G"].shm_bytes


def test_a_shape_given_replaces_only_the_fields_it_names(monkeypatch):
    monkeypatch.setenv(
        "BELVEDIR_GPU_SHAPES", " a10g:cpus=6,memory=48g ; H100:disk=1t,shm=512m;t4:cpus=4 "
    )
    shapes = envgpushapes("BELVEDIR_GPU_SHAPES")
    assert shapes["A10G"] == GpuShape(6, "48g", 100 * GiB, 8 * GiB)
    assert shapes["H100"] == GpuShape(16, "96g", 1024 * GiB, 512 * 2**20)
    assert shapes["L4"] == DEFAULT_SHAPES["L4"]
    assert shapes["T4"] == GpuShape(4, "32g", 100 * GiB, 8 * GiB)  # a type of no default
    assert parse_shapes(shapes_text(shapes)) == shapes
    monkeypatch.delenv("BELVEDIR_GPU_SHAPES")
    assert envgpushapes("BELVEDIR_GPU_SHAPES") == DEFAULT_SHAPES


@pytest.mark.parametrize(
    ("value", "bad_part"),
    [
        ("a10g", "'a10g'"),
        ("a10g:cpus=8;a10g:shm=1g", "A10G is given twice"),
        ("a10g:cpus=lots", "'cpus=lots'"),
        ("a10g:cpus=0", "'cpus=0'"),
        ("a10g:memory=32x", "'memory=32x'"),
        ("a10g:memory=512m", "'memory=512m': at least 1g"),
        ("a10g:memory=1t", "'memory=1t'"),
        ("a10g:disk=100", "'disk=100': at least 1g"),
        ("a10g:shm=1m", "'shm=1m': at least 64m"),
        ("a10g:gpus=2", "unknown field 'gpus'"),
        ("a10g:cpus", "'cpus'"),
        ("1a:cpus=8", "'1a:cpus=8'"),
        ("a10g:cpus=8,memory=32g,disk=100g,shm=8g,swap=4g", "'swap=4g'"),
    ],
)
def test_a_bad_shape_names_the_setting_and_the_bad_part(monkeypatch, value, bad_part):
    monkeypatch.setenv("BELVEDIR_GPU_SHAPES", value)
    with pytest.raises(ImproperlyConfigured) as raised:
        envgpushapes("BELVEDIR_GPU_SHAPES")
    assert str(raised.value).startswith("BELVEDIR_GPU_SHAPES: ")
    assert bad_part in str(raised.value)


def test_a_gpu_runs_sandbox_gets_its_types_shape_device_and_the_gpu_runtime(settings):
    settings.BELVEDIR_GPU_SIMULATE = False
    settings.BELVEDIR_GPU_RUNTIME = "runsc-gpu"
    settings.BELVEDIR_GPU_SHAPES = parse_shapes("l4:cpus=4")
    for kind, device in [("A10G", "0"), ("L4", "1"), ("A100", "2"), ("H100", "3")]:
        shape = settings.BELVEDIR_GPU_SHAPES[kind]
        assert gpu_sandbox(kind, device) == {
            "cpus": shape.cpus,
            "memory": shape.memory,
            "disk_bytes": shape.disk_bytes,
            "shm_bytes": shape.shm_bytes,
            "gpu_device": device,
            "runtime": "runsc-gpu",
        }
    assert gpu_sandbox("L4", "1")["cpus"] == 4
    settings.BELVEDIR_GPU_RUNTIME = "runc"
    assert gpu_sandbox("A10G", "0")["runtime"] == "runc"


def test_a_simulated_gpu_gets_the_shape_but_no_device_nor_the_gpu_runtime(settings):
    settings.BELVEDIR_GPU_SIMULATE = True
    fields = gpu_sandbox("A100", "0")
    assert "gpu_device" not in fields and "runtime" not in fields
    # At most the machine's own CPUs (Docker refuses more): 12 on a host that has them.
    assert fields["shm_bytes"] == 16 * GiB and fields["cpus"] == min(12, os.cpu_count())
    assert fields["disk_bytes"] == settings.BELVEDIR_SANDBOX_DISK  # the CPU runs' (10 GiB)


def test_a_gpu_image_set_is_the_gpu_runs_image_and_none_set_leaves_the_sandbox_image(settings):
    settings.BELVEDIR_GPU_IMAGE = ""
    assert "image" not in gpu_sandbox("A10G", "0")
    settings.BELVEDIR_GPU_IMAGE = "belvedir-sandbox-gpu:latest"
    assert gpu_sandbox("A10G", "0")["image"] == "belvedir-sandbox-gpu:latest"


def test_without_disk_quotas_a_gpu_sandbox_gets_none_either(settings):
    settings.BELVEDIR_SANDBOX_DISK = 0
    assert gpu_sandbox("A10G", "0")["disk_bytes"] is None


def test_a_shape_of_a_type_no_harness_can_ask_for_fails_the_system_check(settings):
    settings.BELVEDIR_GPU_SHAPES = parse_shapes("t4:cpus=4")
    errors = [m for m in run_checks() if m.id == "harnesses.E002"]
    assert len(errors) == 1 and "BELVEDIR_GPU_SHAPES names T4" in errors[0].msg
    settings.BELVEDIR_GPU_SHAPES = parse_shapes("")
    assert not [m for m in run_checks() if m.id == "harnesses.E002"]
