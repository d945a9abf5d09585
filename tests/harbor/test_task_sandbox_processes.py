"""How few processes a task sandbox's calls start (under gVisor each one costs), and that the
limits hold however few: an exec's deadline still kills, a download still stops at its byte
limit whatever the sandbox says of its size. Real Docker, gVisor, through the gateway."""

import io
import tarfile

import docker
import pytest

from harbor.models import TaskSandbox
from sandboxes import taskd, taskfiles
from sandboxes.base import SandboxError
from tests.helpers.task_sandboxes import context_tar, fresh_dockerfile, tar_of, with_files

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


def processes(client, sandbox_id: str) -> str:
    """Every process's command line in the sandbox."""
    lines = client.exec_lines(
        sandbox_id, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
    )
    return "".join(line.get("data", "") for line in lines)


def by_the_engine(sandbox_id: str) -> None:
    """This process's calls to the sandbox go by `docker exec`, as where it has no server."""
    taskd._remember(TaskSandbox.objects.get(pk=sandbox_id).container_id, None)


def test_an_exec_by_the_server_starts_bash_alone_and_its_deadline_still_kills(
    managed, task_images, started
):
    run, client = managed
    sandbox = client.create("served", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    started.clear()

    lines = client.exec_lines(sandbox["id"], "echo start; sleep 60; echo never", timeout_sec=2)

    assert started == [["bash", "-c", "echo start; sleep 60; echo never"]]  # no `timeout`
    assert lines[0] == {"stream": "stdout", "data": "start\n"}
    assert lines[-1] == {"exit_code": 137, "timed_out": True}
    assert all(line.get("data") != "never\n" for line in lines)
    assert "sleep 60" not in processes(client, sandbox["id"])  # killed, not left running


def test_once_a_container_is_known_an_exec_starts_timeout_directly_and_its_deadline_still_kills(
    managed, task_images, started
):
    run, client = managed
    sandbox = client.create("known", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    by_the_engine(sandbox["id"])
    assert client.put_files(sandbox["id"], "/app/in", tar_of({"a": "A"})).status == 204
    started.clear()

    assert client.put_files(sandbox["id"], "/app/in", tar_of({"b": "B"})).status == 204
    lines = client.exec_lines(sandbox["id"], "echo start; sleep 60; echo never", timeout_sec=2)

    assert [argv[0] for argv in started] == ["sh", "timeout"], started  # no check, no sh
    assert started[1][:5] == ["timeout", "-s", "KILL", "2", "bash"]
    assert lines[0] == {"stream": "stdout", "data": "start\n"}
    assert lines[-1]["timed_out"] is True
    assert all(line.get("data") != "never\n" for line in lines)
    assert "sleep 60" not in processes(client, sandbox["id"])  # killed, not left running


def test_a_callers_path_has_the_shell_look_for_timeout_as_before(managed, task_images, started):
    run, client = managed
    sandbox = client.create("path", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    by_the_engine(sandbox["id"])
    assert client.put_files(sandbox["id"], "/app/in", tar_of({"a": "A"})).status == 204
    started.clear()

    lines = client.exec_lines(sandbox["id"], "echo $PATH", env={"PATH": "/usr/bin:/bin"})

    assert started[0][:2] == ["sh", "-c"], started
    assert lines[0] == {"stream": "stdout", "data": "/usr/bin:/bin\n"}


def test_an_image_without_timeout_still_answers_at_the_deadline(managed, task_images):
    run, client = managed
    dockerfile = fresh_dockerfile() + "RUN rm -f /usr/bin/timeout /bin/timeout\n"
    sandbox = client.create("no-timeout", context_tar(dockerfile)).json()
    task_images.add(sandbox["image"])
    assert client.put_files(sandbox["id"], "/app/in", tar_of({"a": "A"})).status == 204

    lines = client.exec_lines(sandbox["id"], "echo start; sleep 60", timeout_sec=1)

    assert lines[0] == {"stream": "stdout", "data": "start\n"}
    assert lines[-1]["timed_out"] is True


# du as busybox has it: no -b (sizes in KiB with -k).
BUSYBOX_DU = (
    "RUN mv /usr/bin/du /usr/bin/du.real && printf '%s\\n' '#!/bin/sh' "
    '\'case "$1" in -sb) echo "du: invalid option -- b" >&2; exit 1;; esac\' '
    "'exec /usr/bin/du.real \"$@\"' > /usr/bin/du && chmod +x /usr/bin/du\n"
)
# A task that lies about its files' size: du says 0 whatever it is asked.
LYING_DU = "RUN printf '%s\\n' '#!/bin/sh' 'echo \"0\t$3\"' > /usr/bin/du && chmod +x /usr/bin/du\n"


def test_a_download_is_sized_where_du_has_no_b_and_refused_past_its_limit(
    managed, task_images, monkeypatch
):
    run, client = managed
    sandbox = with_files(
        client, task_images, BUSYBOX_DU, "head -c 20000 /dev/zero > /app/big; echo hi > /app/s"
    )

    small = client.get_files(sandbox["id"], "/app/s")
    monkeypatch.setattr("harbor.api.DOWNLOAD_MAX_BYTES", 4096)
    big = client.get_files(sandbox["id"], "/app/big")

    assert small.status == 200, small.body
    with tarfile.open(fileobj=io.BytesIO(small.body)) as tar:
        assert tar.extractfile("s").read() == b"hi\n"
    assert big.status == 413 and big.json()["code"] == "too_large", big.body


def test_a_sandbox_that_lies_about_a_size_never_makes_the_platform_read_past_the_limit(
    managed, task_images, monkeypatch
):
    run, client = managed
    sandbox = with_files(client, task_images, LYING_DU, "head -c 4000000 /dev/urandom > /app/big")
    monkeypatch.setattr("harbor.api.DOWNLOAD_MAX_BYTES", 4096)

    got = client.get_files(sandbox["id"], "/app/big")

    # The size said 0, so the tar was sent, and cut off at the limit and the tar's own 1 MB.
    assert len(got.body) <= 4096 + (1 << 20) + (1 << 16), len(got.body)


def test_a_download_cut_at_the_limit_ends_in_an_error_not_a_clean_end(managed, task_images):
    run, client = managed
    sandbox = with_files(client, task_images, LYING_DU, "head -c 4000000 /dev/urandom > /app/big")
    container = TaskSandbox.objects.get(pk=sandbox["id"]).container_id
    engine = docker.from_env()

    size, chunks = taskfiles.open_tar(engine, container, path="/app/big", max_bytes=4096)

    # The response streaming it breaks off (uvicorn ends a chunked body without its last
    # chunk), so the driver's read fails instead of taking a cut tar for a whole one.
    assert size == 0
    with pytest.raises(SandboxError, match="over 4,096 bytes"):
        for _ in chunks:
            pass
