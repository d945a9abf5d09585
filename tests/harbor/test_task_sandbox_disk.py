"""A task sandbox's disk limit: its root is writable (Harbor tasks write anywhere), so the
run's worker watches its writable layer from the heartbeat and stops one that wrote past
BELVEDIR_TASK_SANDBOX_DISK, with the reason on its row, in the API's refusals and as a
`belvedir:` line in the run's log. /tmp is gVisor's own memory: the memory limit bounds it."""

import docker
import pytest

from belvedir.sandbox_config import get_backend
from harbor import disk
from harbor.models import TaskSandbox
from harbor.services import task_sandbox_create
from runs.heartbeat import Heartbeat
from runs.logtail import LogTail
from runs.models import Run
from sandboxes import tasks as docker_tasks
from tests.helpers.task_sandboxes import (
    Client,
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    remove_task_images,
    task_containers,
)
from tests.runs.helpers import wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]
MiB = 2**20


@pytest.fixture
def start(owner, sandbox_settings, tmp_path):
    """start(name) -> (run, run key, task sandbox): a managed run's task sandbox, as the
    platform starts it; the images removed afterwards."""
    context = tmp_path / "context.tar.gz"
    context.write_bytes(context_tar(fresh_dockerfile()))
    made: list[TaskSandbox] = []

    def do(name: str):
        run, key = make_managed_run(owner)
        sandbox = task_sandbox_create(run=run, name=name, context=context)
        made.append(sandbox)
        return run, key, sandbox

    yield do
    remove_task_images({sandbox.image for sandbox in made})


def write(sandbox: TaskSandbox, path: str, mib: int, detach: bool = False):
    container = docker.from_env().containers.get(sandbox.container_id)
    command = ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}"]
    result = container.exec_run(command, detach=detach)
    assert detach or result.exit_code == 0, result.output


def test_the_limit_is_the_run_sandboxes_quota_unless_set(settings):
    settings.BELVEDIR_SANDBOX_DISK = 3 * 2**30
    settings.BELVEDIR_TASK_SANDBOX_DISK = 0
    assert disk.limit_bytes() == 3 * 2**30
    settings.BELVEDIR_TASK_SANDBOX_DISK = 64 * MiB
    assert disk.limit_bytes() == 64 * MiB


def test_a_task_sandbox_within_its_limit_keeps_running(start, sandbox_settings):
    sandbox_settings.BELVEDIR_TASK_SANDBOX_DISK = 32 * MiB
    run, _, sandbox = start("small")
    write(sandbox, "/root/fill", 8)
    backend = get_backend()

    written = docker_tasks.written_bytes(backend.client, [sandbox.container_id])
    assert 8 * MiB <= written[sandbox.container_id] < 32 * MiB

    assert disk.check_run(run_id=run.pk, backend=backend) == []
    sandbox.refresh_from_db()
    assert sandbox.status == "running" and len(task_containers(run.pk)) == 1


def test_a_task_sandbox_writing_past_its_limit_is_stopped_with_a_note_in_the_run_log(
    start, sandbox_settings, monkeypatch
):
    sandbox_settings.BELVEDIR_TASK_SANDBOX_DISK = 32 * MiB
    monkeypatch.setattr(disk, "CHECK_SECONDS", 0.5)
    run, key, sandbox = start("fill")
    heartbeat = Heartbeat(run.pk, LogTail([]), backend=get_backend())
    heartbeat.start()
    heartbeat.sandbox_started()  # as the executor says once the run's sandbox is up
    try:
        write(sandbox, "/usr/local/fill", 48)  # anywhere in the root: not a quota volume

        wait_for(
            lambda: "belvedir: task sandbox" in Run.objects.get(pk=run.pk).log_tail,
            20,
            "the note in the run's log",
        )
    finally:
        heartbeat.stop()

    sandbox.refresh_from_db()
    assert sandbox.status == "failed" and sandbox.stopped_at is not None
    assert sandbox.error.startswith(f"task sandbox 'fill' ({sandbox.pk}) wrote 4")
    assert "over the 32 MiB a task sandbox may write (BELVEDIR_TASK_SANDBOX_DISK)" in sandbox.error
    assert f"belvedir: {sandbox.error}" in Run.objects.get(pk=run.pk).log_tail
    assert task_containers(run.pk) == []
    assert sandbox.charged  # its minutes settled like any stop
    # The driver's next call says why.
    refused = Client(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, key).call(
        "POST",
        f"/task-sandboxes/{sandbox.pk}/exec",
        b'{"command": "true"}',
        {"Content-Type": "application/json"},
    )
    assert refused.status == 400 and "BELVEDIR_TASK_SANDBOX_DISK" in refused.body.decode()


def test_tmp_is_gvisor_memory_bounded_by_the_memory_limit(start, sandbox_settings):
    sandbox_settings.BELVEDIR_SANDBOX_MEMORY = "256m"
    run, _, sandbox = start("tmp")
    backend = get_backend()
    write(sandbox, "/tmp/fill", 64)

    written = docker_tasks.written_bytes(backend.client, [sandbox.container_id])
    assert written[sandbox.container_id] < 8 * MiB  # not on the host's disk

    write(sandbox, "/tmp/more", 400, detach=True)  # past the memory limit

    container = docker.from_env().containers.get(sandbox.container_id)
    wait_for(lambda: container.reload() or container.status != "running", 60, "the OOM kill")
    assert container.attrs["State"]["OOMKilled"] is True
