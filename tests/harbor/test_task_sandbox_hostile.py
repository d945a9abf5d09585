"""A task sandbox whose tools lie or never answer (its sh, du, tar and timeout are the task's):
what one container does stays with it, and the shared gateway's memory and time stay bounded.
Real Docker, gVisor, through the gateway; every call here has a short deadline of its own, so
a regression fails instead of hanging."""

import io
import json
import tarfile
import time
import tracemalloc

import pytest

from tests.helpers.task_sandboxes import context_tar, fresh_dockerfile, tar_of, with_files

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]

SHORT = 30  # seconds any one call of these tests may take


def two_of_one_image(client, task_images, steps: str = "") -> tuple[dict, dict]:
    context = context_tar(fresh_dockerfile() + steps)
    first = client.create("first", context).json()
    task_images.add(first["image"])
    second = client.create("second", context).json()
    assert second["image"] == first["image"]
    return first, second


def exec_lines(client, sandbox_id: str, command: str) -> list[dict]:
    body = json.dumps({"command": command}).encode()
    path = f"/task-sandboxes/{sandbox_id}/exec"
    answer = client.call("POST", path, body, {"Content-Type": "application/json"}, timeout=SHORT)
    assert answer.status == 200, answer.body
    return [json.loads(line) for line in answer.body.splitlines()]


def download(client, sandbox_id: str, path: str):
    return client.call("GET", f"/task-sandboxes/{sandbox_id}/files?path={path}", timeout=SHORT)


def upload(client, sandbox_id: str, path: str, body: bytes):
    headers = {"Content-Type": "application/x-tar"}
    return client.call(
        "PUT", f"/task-sandboxes/{sandbox_id}/files?path={path}", body, headers, timeout=SHORT
    )


def test_a_container_that_removes_its_tar_leaves_its_images_other_containers_using_tar(
    managed, task_images, started
):
    run, client = managed
    first, second = two_of_one_image(client, task_images)
    assert exec_lines(client, first["id"], "rm -f $(command -v tar)")[-1]["exit_code"] == 0
    assert exec_lines(client, second["id"], "echo hi > /tmp/f")[-1]["exit_code"] == 0
    download(client, first["id"], "/etc/hostname")  # learns that this one has no tar
    started.clear()

    got = download(client, second["id"], "/tmp/f")

    assert got.status == 200, got.body
    with tarfile.open(fileobj=io.BytesIO(got.body)) as tar:
        assert tar.extractfile("f").read() == b"hi\n"
    assert any("tar -c" in " ".join(argv) for argv in started), started  # its own tar


def test_a_fake_timeout_planted_in_one_container_leaves_the_others_execs_working(
    managed, task_images
):
    run, client = managed
    first, second = two_of_one_image(client, task_images, "RUN rm -f /usr/bin/timeout\n")
    plant = (
        "printf '#!/bin/sh\\nshift 3; exec \"$@\"\\n' > /usr/local/bin/timeout"
        " && chmod +x /usr/local/bin/timeout"
    )
    assert exec_lines(client, first["id"], plant)[-1]["exit_code"] == 0
    assert upload(client, first["id"], "/app/in", tar_of({"a": "A"})).status == 204

    lines = exec_lines(client, second["id"], "echo ok")

    assert lines == [{"stream": "stdout", "data": "ok\n"}, {"exit_code": 0, "timed_out": False}]


def test_a_container_that_removes_its_timeout_still_runs_its_commands(managed, task_images):
    run, client = managed
    sandbox = client.create("no-more-timeout", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    assert upload(client, sandbox["id"], "/app/in", tar_of({"a": "A"})).status == 204  # learned
    assert exec_lines(client, sandbox["id"], "rm -f $(command -v timeout)")[-1]["exit_code"] == 0

    lines = exec_lines(client, sandbox["id"], "echo ok")

    assert lines == [{"stream": "stdout", "data": "ok\n"}, {"exit_code": 0, "timed_out": False}]


def fake(program: str, *lines: str) -> str:
    """A Dockerfile step putting a script in place of `program`."""
    script = " ".join(f"'{line}'" for line in ("#!/bin/sh", *lines))
    return f'RUN p=$(command -v {program}) && printf "%s\\n" {script} > "$p" && chmod +x "$p"\n'


# du as busybox has it (no -b), then a -sk that never says a size.
DU_FLOODS_STDERR = fake(
    "du", 'case "$1" in -sb) exit 1;; esac', "head -c 100000000 /dev/zero >&2", "exit 1"
)
DU_SLEEPS = fake("du", 'case "$1" in -sb) exit 1;; esac', "sleep 3600")
TAR_FLOODS_STDOUT = fake("tar", "head -c 200000000 /dev/zero", "sleep 3600")


def peak_bytes(call):
    """(what `call()` returned, the most memory this process held meanwhile)."""
    tracemalloc.start()
    try:
        answer = call()
        return answer, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_du_that_floods_stderr_fails_the_download_in_bounded_memory(managed, task_images):
    run, client = managed
    sandbox = with_files(client, task_images, DU_FLOODS_STDERR, "echo hi > /app/s")

    got, peak = peak_bytes(lambda: download(client, sandbox["id"], "/app/s"))

    assert got.status == 400 and "no size" in got.json()["path"][0], got.body
    assert peak < 16 * 2**20, peak


def test_a_du_that_never_answers_fails_the_download_at_the_deadline(
    managed, task_images, monkeypatch
):
    run, client = managed
    sandbox = with_files(client, task_images, DU_SLEEPS, "echo hi > /app/s")
    monkeypatch.setattr("sandboxes.taskfiles.SIZE_SECONDS", 2.0)
    began = time.monotonic()

    got = download(client, sandbox["id"], "/app/s")

    assert got.status == 400 and "within 2 s" in got.json()["path"][0], got.body
    assert time.monotonic() - began < 10


def test_a_tar_that_floods_stdout_fails_the_upload_in_bounded_memory_and_time(
    managed, task_images, monkeypatch
):
    run, client = managed
    sandbox = with_files(client, task_images, TAR_FLOODS_STDOUT, "true")
    monkeypatch.setattr("sandboxes.taskfiles.UPLOAD_SECONDS", 5.0)
    body = tar_of({"big": "x" * 10_000_000})
    began = time.monotonic()

    got, peak = peak_bytes(lambda: upload(client, sandbox["id"], "/app/in", body))

    assert got.status == 400 and "tar said more than" in got.json()["body"][0], got.body
    assert peak < 48 * 2**20, peak
    assert time.monotonic() - began < 15


def test_a_tar_that_never_reads_fails_the_upload_at_the_deadline(managed, task_images, monkeypatch):
    run, client = managed
    sandbox = with_files(client, task_images, fake("tar", "sleep 3600"), "true")
    monkeypatch.setattr("sandboxes.taskfiles.UPLOAD_SECONDS", 3.0)
    body = tar_of({"big": "x" * 10_000_000})
    began = time.monotonic()

    got = upload(client, sandbox["id"], "/app/in", body)

    assert got.status == 400 and "within 3 s" in got.json()["body"][0], got.body
    assert time.monotonic() - began < 12
