"""Fixtures for tests that run the example harness in real sandboxes (runs, browser, traces).

Registered for the whole suite in tests/conftest.py (`pytest_plugins`).
"""

import contextlib
import http.server
import random
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from harnesses.services import harness_create
from sandboxes.gpu import parse_shapes, shapes_text
from tests.runs.helpers import EXAMPLES, git_repo_of, start_qcluster, stop_qcluster

T = TypeVar("T")
# A GPU sandbox this 2-CPU machine can start (Docker refuses more CPUs than the host has).
TEST_GPU_SHAPE = "a10g:cpus=1,memory=1g,disk=2g,shm=256m"


@pytest.fixture
def contract_repo(tmp_path) -> str:
    return git_repo_of(EXAMPLES / "contract-harness", tmp_path / "contract-harness")


@pytest.fixture
def sandbox_settings(settings, sandbox_gateway):
    """Sandboxes as production runs them (the isolated network, gVisor, a disk quota), with
    test-sized limits; they reach this test's live server through the sandbox gateway."""
    settings.BELVEDIR_SANDBOX_MEMORY = "1g"
    settings.BELVEDIR_SANDBOX_CPUS = 1.0
    settings.BELVEDIR_SANDBOX_DISK = 2 * 2**30
    settings.BELVEDIR_RUN_TIMEOUT = 120
    return settings


def worker_env(settings) -> dict[str, str]:
    """This test's sandbox (and GPU) settings, for a worker in another process."""
    return {
        "BELVEDIR_SANDBOX_BASE_URL": settings.BELVEDIR_SANDBOX_BASE_URL,
        "BELVEDIR_SANDBOX_MEMORY": str(settings.BELVEDIR_SANDBOX_MEMORY),
        "BELVEDIR_SANDBOX_CPUS": str(settings.BELVEDIR_SANDBOX_CPUS),
        "BELVEDIR_SANDBOX_DISK": str(settings.BELVEDIR_SANDBOX_DISK),
        "BELVEDIR_INSTALL_CACHE_BYTES": str(settings.BELVEDIR_INSTALL_CACHE_BYTES),
        "BELVEDIR_GPU_TYPES": ",".join(f"{k}:{n}" for k, n in settings.BELVEDIR_GPU_TYPES.items()),
        "BELVEDIR_GPU_SIMULATE": "1" if settings.BELVEDIR_GPU_SIMULATE else "0",
        "BELVEDIR_GPU_SHAPES": shapes_text(settings.BELVEDIR_GPU_SHAPES),
        "BELVEDIR_WORKER_HOST": settings.BELVEDIR_WORKER_HOST,
    }


@pytest.fixture
def gpu_settings(settings):
    """One simulated A10G on this host (BELVEDIR_GPU_SIMULATE=1): GPU harnesses of that type
    launch, and their runs claim the device but run without one, in a test-sized A10G shape."""
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    settings.BELVEDIR_GPU_SIMULATE = True
    settings.BELVEDIR_GPU_SHAPES = parse_shapes(TEST_GPU_SHAPE)
    return settings


@pytest.fixture
def make_harness(owner, contract_repo):
    def make(name: str = "contract", **fields):
        data = {
            "name": name,
            "repo_url": contract_repo,
            "install_command": "bash install.sh",
            "run_command": "python3 run.py",
            **fields,
        }
        return harness_create(project=owner.project, created_by=owner.user, **data)

    return make


@pytest.fixture
def cluster(sandbox_settings, tmp_path):
    """The runs cluster (`Q_CLUSTER_NAME=runs manage.py qcluster`, one worker) on this test's
    database (the ORM broker), stopped afterwards the way scripts/up.sh stops it."""
    log = tmp_path / "qcluster.log"
    process = start_qcluster("runs", log, Q_WORKERS="1", **worker_env(sandbox_settings))
    try:
        yield log
    finally:
        stop_qcluster(process)


@pytest.fixture
def gpu_cluster(sandbox_settings, gpu_settings, tmp_path):
    """The A10G GPU cluster (`Q_CLUSTER_NAME=gpu-a10g manage.py qcluster`, one worker for the
    one simulated device) on this test's database, as a GPU worker host runs it."""
    log = tmp_path / "qcluster-gpu.log"
    process = start_qcluster("gpu-a10g", log, **worker_env(sandbox_settings))
    try:
        yield log
    finally:
        stop_qcluster(process)


def sandbox_ports() -> list[int]:
    """The ports sandboxes may reach on the gateway IP, in random order (tests running side
    by side then rarely try the same one first)."""
    from django.conf import settings

    low, _, high = settings.BELVEDIR_SANDBOX_PORTS.partition(":")
    ports = list(range(int(low), int(high or low) + 1))
    random.shuffle(ports)
    return ports


def serve_to_sandboxes(make: Callable[[str, int], T]) -> T:
    """`make(host, port)` on the gateway IP and a free sandbox port: the only place on this
    host sandboxes reach (a model server or a package index standing in for the internet)."""
    from django.conf import settings

    for port in sandbox_ports():
        try:
            return make(settings.BELVEDIR_SANDBOX_GATEWAY, port)
        except OSError:
            continue
    pytest.fail(f"no free port in {settings.BELVEDIR_SANDBOX_PORTS} on the gateway IP")


@contextlib.contextmanager
def http_for_sandboxes(handler, name: str):
    """A threading HTTP server of `handler` where sandboxes reach it (serve_to_sandboxes),
    served from a thread while the block runs: its URL, with a trailing slash."""
    server = serve_to_sandboxes(
        lambda host, port: http.server.ThreadingHTTPServer((host, port), handler)
    )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name=name).start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sandbox_gateway(live_server, settings):
    """The sandbox gateway on the sandbox network's gateway IP (a free port of the sandbox
    port range), forwarding to this test's live server; sandboxes get it as their base URL."""
    from sandboxes.gateway import GatewayThread

    gateway = GatewayThread(
        host=settings.BELVEDIR_SANDBOX_GATEWAY, ports=sandbox_ports(), upstream=live_server.url
    )
    settings.BELVEDIR_SANDBOX_BASE_URL = gateway.url
    yield gateway.url
    gateway.stop()


@pytest.fixture
def media_root(settings, tmp_path):
    """Uploaded files (adapter zips) land in this test's own directory (MEDIA_ROOT)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


@pytest.fixture
def make_fine_tuned(owner, media_root):
    """A fine-tuned model of the owner's project with a small valid adapter zip."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from models_registry.services import fine_tuned_model_create
    from tests.helpers.adapters import adapter_zip_bytes

    def make(name: str = "llama-lora-v1", base_model: str = "meta-llama/Llama-3.1-8B", **kw):
        adapter = SimpleUploadedFile("adapter.zip", adapter_zip_bytes(), "application/zip")
        return fine_tuned_model_create(
            project=kw.pop("project", owner.project),
            name=name,
            base_model=base_model,
            adapter=adapter,
            created_by=owner.user,
            **kw,
        )

    return make


@pytest.fixture
def task_sandboxes_removed(db):
    """Every task sandbox container this test session started, removed when the test ends
    (passing or not): a test's run may still be "running" when it ends."""
    yield
    import docker

    from belvedir.sandbox_config import instance_id
    from sandboxes.base import LABEL_INSTANCE, LABEL_TASK_SANDBOX

    client = docker.from_env()
    try:
        labels = [LABEL_TASK_SANDBOX, f"{LABEL_INSTANCE}={instance_id()}"]
        for container in client.containers.list(
            all=True, filters={"label": labels}, ignore_removed=True
        ):
            container.remove(force=True)
    finally:
        client.close()


def fast_hashing(settings) -> None:
    """The shared fixtures sign users up; a slow hasher would dominate these tests' setup."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


FAKELAB_MODEL = "fakelab/fake-model"


@pytest.fixture
def fakelab_model(db):
    """A covered model of a fake lab, `fakelab/fake-model`, for runs whose model (or judge)
    is covered through the router to a local upstream."""
    from models_registry.models import CoveredModel, Lab

    lab = Lab.objects.create(name="Fake Lab", slug="fakelab", vendor_prefixes="fakelab")
    return CoveredModel.objects.create(
        model_id=FAKELAB_MODEL,
        display_name="Fake model",
        lab=lab,
        input_price_micros=1_000_000,
        output_price_micros=2_000_000,
        max_output_tokens=1000,
    )


@pytest.fixture
def make_run(owner):
    """A Run row written directly (no launch, no sandbox), for pages, lists and caps."""
    from runs.models import Run

    def make(project=None, harness=None, **fields):
        project = project or owner.project
        values = {"harness_name": harness.name if harness else "contract", **fields}
        return Run.objects.create(project=project, harness=harness, **values)

    return make
