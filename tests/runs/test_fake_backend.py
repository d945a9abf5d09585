"""The sandbox interface is enough: a run and a task sandbox go their whole way through an
in-memory backend written against `SandboxBackend` alone (tests/helpers/fake_backend.py),
picked by BELVEDIR_SANDBOX_BACKEND as any backend is, with no engine called."""

import importlib
import io
import json
import tarfile
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from belvedir import isolation
from belvedir.sandbox_config import get_backend
from harbor import disk, reaper
from harbor.models import TaskSandbox
from runs import contract
from runs import reaper as run_reaper
from runs.executor import execute_run
from sandboxes import tasks as task_defaults
from sandboxes.base import (
    LABEL_RUN_ID,
    LABEL_TASK_SANDBOX,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
)
from tests.helpers import fake_backend
from tests.helpers.task_sandboxes import make_managed_run


@pytest.fixture
def fake(settings, tmp_path, monkeypatch):
    """The fake backend configured, with an engine of this test's own; the Docker SDK's client
    refuses to be made, so anything that went around the interface to an engine fails."""
    settings.BELVEDIR_SANDBOX_BACKEND = "tests.helpers.fake_backend:FakeBackend"
    settings.BELVEDIR_INSTANCE = f"fake-{uuid.uuid4().hex[:8]}"
    settings.BELVEDIR_SANDBOX_HOST_NETWORK = True  # no firewall to check: nothing runs here
    settings.BELVEDIR_SANDBOX_DATA_DIR = str(tmp_path / "sandboxes")
    monkeypatch.setattr(isolation, "_cached", None)

    def no_engine(*args, **kwargs):
        raise AssertionError("a Docker client was made: something went around the interface")

    api = importlib.import_module("docker.api.client")
    monkeypatch.setattr(api.APIClient, "__init__", no_engine)
    yield fake_backend.engine_of(settings.BELVEDIR_INSTANCE)
    fake_backend.ENGINES.pop(settings.BELVEDIR_INSTANCE, None)


def test_the_configured_backend_can_be_one_of_ones_own(fake, settings):
    assert isinstance(get_backend(), fake_backend.FakeBackend)
    settings.BELVEDIR_SANDBOX_BACKEND = "tests.helpers.fake_backend:NoSuchBackend"
    with pytest.raises(SandboxError, match="no sandbox backend"):
        get_backend()


@pytest.mark.django_db
def test_the_reapers_pass_goes_through_the_fake_backend_alone(fake):
    """Every engine call of a reaper pass is an interface method (its warm pool and gone
    instances too): the fake, which has only those, answers them all."""
    backend = get_backend()
    assert isinstance(backend, SandboxBackend)  # every method of the protocol, by name
    orphan = backend.launch(
        SandboxSpec(run_id="run_gone", image="x", command=["sleep", "infinity"])
    )

    swept = run_reaper.reap()

    assert swept["removed"] == 1 and orphan.id not in fake.sandboxes
    assert swept["warm_removed"] == [] and swept["gone_removed"] == []


def play_contract_harness(sandbox: fake_backend.FakeSandbox) -> int:
    """What the contract harness does in its sandbox: its run.py writes results.json with the
    score it is given."""
    assert f"{contract.REPO_DIR}/run.py" in sandbox.files, sorted(sandbox.files)
    assert f"{contract.WORKSPACE}/.belvedir/run.sh" in sandbox.files, sorted(sandbox.files)
    sandbox.say("belvedir: starting the run command\n")
    score = sandbox.spec.env.get("SCORE")
    if score is None:
        sandbox.say("no score\n")
        return 3
    sandbox.write(f"{contract.REPO_DIR}/results.json", json.dumps({"score": float(score)}).encode())
    return 0


@pytest.mark.django_db(transaction=True)
def test_a_run_goes_its_whole_way_through_the_fake_backend(fake, launch):
    fake.harness = play_contract_harness

    run = launch(env={"SCORE": "0.5"})
    assert execute_run(run.pk) == "succeeded"

    run.refresh_from_db()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == 0.5 and run.exit_code == 0
    assert "belvedir: starting the run command" in run.log_tail
    assert run.container_id.startswith("fake-")
    assert fake.sandboxes == {}, "the run's sandbox was not removed at its end"

    failed = launch()
    execute_run(failed.pk)
    failed.refresh_from_db()
    assert failed.status == "failed" and failed.exit_code == 3
    assert "belvedir: the run command exited with code 3." in failed.notes
    assert "no score" in failed.log_tail and fake.sandboxes == {}


def context(dockerfile: str) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    return SimpleUploadedFile("context.tar.gz", buffer.getvalue(), "application/gzip")


def tar_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.mark.django_db
def test_a_task_sandbox_goes_its_whole_way_through_the_fake_backend(fake, owner, settings):
    run, key = make_managed_run(owner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    dockerfile = "FROM belvedir-sandbox:latest\nWORKDIR /app\n"

    made = api.post(
        "/api/v1/task-sandboxes",
        {"name": "task", "context": context(dockerfile)},
        format="multipart",
    )
    assert made.status_code == 201, made.content
    first = made.json()
    assert first["status"] == "running" and first["cached"] is False
    assert fake.builds == [first["image"]]
    [box] = fake.sandboxes.values()
    assert box.labels[LABEL_TASK_SANDBOX] == first["id"] and box.labels[LABEL_RUN_ID] == run.pk
    assert box.spec.workdir == "/app" and box.spec.user == ""
    assert box.spec.cap_add == task_defaults.TASK_CAPABILITIES
    assert box.detached, "nobody reads a task sandbox's main output"

    again = api.post(
        "/api/v1/task-sandboxes",
        {"name": "task", "context": context(dockerfile)},
        format="multipart",
    )
    second = again.json()
    assert again.status_code == 201 and second["cached"] is True
    assert fake.builds == [first["image"]], "the image was built again"

    base = f"/api/v1/task-sandboxes/{first['id']}"
    put = api.generic(
        "PUT", f"{base}/files?path=/app", tar_of({"hello.txt": b"hi\n"}), "application/x-tar"
    )
    assert put.status_code == 204, put.content
    ran = api.post(f"{base}/exec", {"command": "cat hello.txt"}, format="json")
    assert ran.status_code == 200
    lines = [json.loads(line) for line in b"".join(ran.streaming_content).splitlines()]
    assert lines == [{"stream": "stdout", "data": "hi\n"}, {"exit_code": 0, "timed_out": False}]
    got = api.get(f"{base}/files?path=/app/hello.txt")
    assert got.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(b"".join(got.streaming_content))) as tar:
        assert tar.extractfile("hello.txt").read() == b"hi\n"
    assert api.get(f"{base}/files?path=/app/missing").status_code == 404

    # The worker's disk check: a task sandbox past its limit is stopped, its row failed.
    box.written = disk.limit_bytes() + 1
    [note] = disk.check_run(run_id=run.pk, backend=get_backend())
    assert note.startswith("belvedir: task sandbox 'task'") and "BELVEDIR_TASK_SANDBOX_DISK" in note
    assert TaskSandbox.objects.get(pk=first["id"]).status == "failed"
    assert box.id not in fake.sandboxes

    # A row stopped on another host leaves its container here: the reaper's pass removes it,
    # and the images nobody uses any more.
    TaskSandbox.objects.filter(pk=second["id"]).update(status="stopped")
    settings.BELVEDIR_TASK_IMAGE_TTL = 0
    reaper.task_sandboxes_reap()
    assert fake.sandboxes == {} and fake.images == {}
