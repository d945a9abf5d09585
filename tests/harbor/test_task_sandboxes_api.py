"""Task sandboxes through their API, as the Harbor driver calls it from a managed run's sandbox:
the run's own key, the sandbox gateway, real Docker (gVisor, the isolated network)."""

import io
import secrets
import tarfile
from datetime import timedelta

import docker
import pytest
from django.utils import timezone

from belvedir.sandbox_config import worker_host
from harbor.models import TaskSandbox
from harbor.services import task_sandbox_stop
from runs.models import Run
from runs.reaper import reap
from tests.helpers.task_sandboxes import (
    BASE_IMAGE,
    Client,
    context_tar,
    count_served,
    fresh_dockerfile,
    managed_client,
    tar_of,
    task_containers,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


def test_a_task_sandbox_is_built_started_used_and_stopped_like_the_driver_does(
    managed, task_images
):
    run, client = managed
    context = context_tar(fresh_dockerfile())

    created = client.create("hello-task", context)

    assert created.status == 201, created.body
    sandbox = created.json()
    task_images.add(sandbox["image"])
    assert sandbox["status"] == "running" and sandbox["run"] == run.pk
    assert sandbox["name"] == "hello-task" and sandbox["cached"] is False
    (container,) = task_containers(run.pk)
    config = docker.from_env().api.inspect_container(container.id)
    assert config["HostConfig"]["Runtime"] == "runsc"
    assert config["HostConfig"]["NetworkMode"] == "belvedir-sandbox"
    assert config["HostConfig"]["Memory"] == 2**30
    assert "no-new-privileges" in config["HostConfig"]["SecurityOpt"]
    assert config["Config"]["Labels"]["belvedir.task_sandbox"] == sandbox["id"]

    lines = client.exec_lines(
        sandbox["id"],
        'echo "out $FOO in $(pwd)"; echo oops >&2; exit 3',
        cwd="/logs",
        env={"FOO": "bar"},
        timeout_sec=60,
    )
    assert {"stream": "stdout", "data": "out bar in /logs\n"} in lines
    assert {"stream": "stderr", "data": "oops\n"} in lines
    assert lines[-1] == {"exit_code": 3, "timed_out": False}

    upload = tar_of({"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n", "a.txt": "A"})
    assert client.put_files(sandbox["id"], "/app/uploaded", upload).status == 204
    lines = client.exec_lines(
        sandbox["id"], "bash /app/uploaded/tests/test.sh && cat a.txt", cwd="/app/uploaded"
    )
    assert lines[-1]["exit_code"] == 0 and {"stream": "stdout", "data": "A"} in lines

    answer = client.get_files(sandbox["id"], "/logs/verifier")
    assert answer.status == 200 and answer.headers["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(answer.body)) as tar:
        reward = tar.extractfile("verifier/reward.txt").read()
    assert reward == b"1\n"
    missing = client.get_files(sandbox["id"], "/logs/nothing-here")
    assert missing.status == 404 and "does not exist" in missing.json()["detail"]

    stopped = client.stop(sandbox["id"])

    assert stopped.status == 200 and stopped.json()["status"] == "stopped"
    assert task_containers(run.pk) == []
    assert client.stop(sandbox["id"]).json()["status"] == "stopped"  # again: the same
    again = client.create("hello-task", context)  # the same environment: no rebuild
    assert again.status == 201 and again.json()["cached"] is True
    assert again.json()["image"] == sandbox["image"]


def test_a_command_past_its_timeout_is_killed_and_says_so(managed, task_images):
    run, client = managed
    sandbox = client.create("slow", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])

    lines = client.exec_lines(sandbox["id"], "echo start; sleep 60; echo never", timeout_sec=2)

    assert lines[0] == {"stream": "stdout", "data": "start\n"}
    assert lines[-1]["timed_out"] is True
    assert all(line.get("data") != "never\n" for line in lines)


@pytest.mark.parametrize(
    "dockerfile,words",
    [
        (f"FROM {BASE_IMAGE}\nRUN echo boom-marker && exit 7\n", "boom-marker"),
        ("FROM belvedir-no-such-image:0\n", "belvedir-no-such-image"),
    ],
)
def test_a_build_that_fails_is_400_with_the_build_log(managed, dockerfile, words):
    run, client = managed

    answer = client.create("broken", context_tar(dockerfile))

    assert answer.status == 400
    assert words in answer.json()["context"][0]
    assert TaskSandbox.objects.get(run=run).status == "failed"
    assert task_containers(run.pk) == []


def no_dockerfile() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("other.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return buffer.getvalue()


@pytest.mark.parametrize(
    "context,words", [(b"not a tar", "not a tar"), (no_dockerfile(), "no Dockerfile")]
)
def test_a_context_that_is_not_a_task_environment_is_refused_naming_it(managed, context, words):
    run, client = managed

    answer = client.create("bad", context)

    assert answer.status == 400
    assert words in answer.json()["context"][0]
    assert not TaskSandbox.objects.filter(run=run).exists()


def test_only_the_runs_own_key_of_a_managed_run_reaches_its_task_sandboxes(
    owner, outsider, managed, task_images, sandbox_settings
):
    run, client = managed
    sandbox = client.create("mine", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    _, other = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    project = Client(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, owner.key)

    assert other.stop(sandbox["id"]).status == 404
    assert other.call("GET", f"/runs/{run.pk}/task-sandboxes").status == 404
    assert project.create("x", context_tar(fresh_dockerfile())).json()["code"] == "not_managed"
    assert (
        Client(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, "bv_live_nope")
        .stop(sandbox["id"])
        .status
        == 401
    )
    listed = client.call("GET", f"/runs/{run.pk}/task-sandboxes").json()
    assert [s["id"] for s in listed["results"]] == [sandbox["id"]]
    by_project = owner.api.get(f"/api/v1/runs/{run.pk}/task-sandboxes")
    assert by_project.status_code == 200 and by_project.json()["count"] == 1
    assert outsider.api.get(f"/api/v1/runs/{run.pk}/task-sandboxes").status_code == 404


def test_a_run_on_its_own_modal_account_gets_no_task_sandboxes(owner, sandbox_settings):
    _, client = managed_client(
        owner,
        sandbox_settings.BELVEDIR_SANDBOX_BASE_URL,
        env={"MODAL_TOKEN_ID": "ak-1", "MODAL_TOKEN_SECRET": "as-1"},
    )

    answer = client.create("t", context_tar(fresh_dockerfile()))

    assert answer.status == 403 and answer.json()["code"] == "not_managed"


def test_exec_runs_as_the_user_asked_and_force_build_skips_the_cache(managed, task_images):
    run, client = managed
    context = context_tar(fresh_dockerfile())
    sandbox = client.create("users", context).json()
    task_images.add(sandbox["image"])

    as_root = client.exec_lines(sandbox["id"], "id -un")
    as_nobody = client.exec_lines(sandbox["id"], "id -un", user="nobody")
    bad = client.call(
        "POST",
        f"/task-sandboxes/{sandbox['id']}/exec",
        b'{"command": "id", "user": "root; rm -rf /"}',
        {"Content-Type": "application/json"},
    )

    assert {"stream": "stdout", "data": "root\n"} in as_root
    assert {"stream": "stdout", "data": "nobody\n"} in as_nobody
    assert bad.status == 400 and "user" in bad.json()
    client.stop(sandbox["id"])
    assert client.create("again", context).json()["cached"] is True
    client.stop(TaskSandbox.objects.get(run=run, name="again").pk)
    rebuilt = client.create_forced("forced", context)
    assert rebuilt.status == 201 and rebuilt.json()["cached"] is False


def test_a_slot_held_by_a_create_whose_process_died_mid_build_is_freed(managed, task_images):
    run, client = managed
    TaskSandbox.objects.bulk_create(
        [
            TaskSandbox(run=run, name=f"lost-{i}", created_at=timezone.now() - timedelta(hours=2))
            for i in range(4)
        ]
    )  # four STARTING rows, as a killed web process would leave them (the limit is 4)

    created = client.create("fresh", context_tar(fresh_dockerfile()))

    assert created.status == 201, created.body
    task_images.add(created.json()["image"])
    lost = TaskSandbox.objects.filter(run=run, name__startswith="lost-")
    assert set(lost.values_list("status", flat=True)) == {"failed"}
    assert "lost while starting" in lost.first().error


def test_exec_keeps_the_images_and_the_callers_path_as_harbors_docker_environment_does(
    managed, task_images
):
    """`bash -c`, not a login shell: Debian's /etc/profile would reset PATH (the sandbox image
    puts /opt/venv/bin first; Harbor's agents pass PATH in env)."""
    run, client = managed
    sandbox = client.create("path", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])

    image_path = client.exec_lines(sandbox["id"], 'echo "$PATH"')
    given_path = client.exec_lines(
        sandbox["id"], 'echo "$PATH"', env={"PATH": "/opt/tool/bin:/usr/bin:/bin"}
    )

    assert image_path[0]["data"].startswith("/opt/venv/bin:"), image_path
    assert given_path[0] == {"stream": "stdout", "data": "/opt/tool/bin:/usr/bin:/bin\n"}


def test_files_move_as_the_sandbox_sees_them_in_tmp_and_as_root(managed, task_images):
    """gVisor keeps /tmp in its own tmpfs, which Docker's archive API (docker cp) never sees;
    Harbor packs transfers in /tmp and uploads to it (terminus-2's scripts). And uploads are
    root's, as Harbor's, even where the image's USER may not write."""
    run, client = managed
    dockerfile = fresh_dockerfile() + "RUN mkdir -m 700 /root-only\nUSER nobody\n"
    sandbox = client.create("tmp", context_tar(dockerfile)).json()
    task_images.add(sandbox["image"])

    put = client.put_files(sandbox["id"], "/tmp/in", tar_of({"a.txt": "A"}))
    assert put.status == 204, put.body
    seen = client.exec_lines(
        sandbox["id"], "cat /tmp/in/a.txt; mkdir -p /tmp/out; echo B > /tmp/out/b"
    )
    assert {"stream": "stdout", "data": "A"} in seen and seen[-1]["exit_code"] == 0
    got = client.get_files(sandbox["id"], "/tmp/out")
    assert got.status == 200, got.body
    with tarfile.open(fileobj=io.BytesIO(got.body)) as tar:
        assert tar.extractfile("out/b").read() == b"B\n"
    assert client.put_files(sandbox["id"], "/root-only/x", tar_of({"c": "C"})).status == 204
    assert client.exec_lines(sandbox["id"], "cat /root-only/x/c", user="root")[0]["data"] == "C"
    assert client.get_files(sandbox["id"], "/tmp/nothing").status == 404
    broken = client.put_files(sandbox["id"], "/tmp/in", b"not a tar archive" * 64)
    assert broken.status == 400 and "could not extract the tar" in broken.json()["body"][0]


def test_an_image_without_tar_still_moves_files_through_dockers_archive_api(managed, task_images):
    run, client = managed
    dockerfile = fresh_dockerfile() + "RUN rm -f /usr/bin/tar /bin/tar\n"
    sandbox = client.create("no-tar", context_tar(dockerfile)).json()
    task_images.add(sandbox["image"])
    assert client.exec_lines(sandbox["id"], "command -v tar")[-1]["exit_code"] != 0

    assert client.put_files(sandbox["id"], "/app/in", tar_of({"a.txt": "A"})).status == 204
    got = client.get_files(sandbox["id"], "/app/in")

    assert got.status == 200, got.body
    with tarfile.open(fileobj=io.BytesIO(got.body)) as tar:
        assert tar.extractfile("in/a.txt").read() == b"A"
    assert client.get_files(sandbox["id"], "/app/nothing").status == 404


def test_a_context_that_unpacks_past_its_limit_is_refused_before_the_build(
    managed, sandbox_settings
):
    """A gzip bomb: small on the wire, huge once unpacked (the engine's builder would write
    all of it to the platform's disk)."""
    run, client = managed
    sandbox_settings.BELVEDIR_TASK_SANDBOX_CONTEXT_UNPACKED_MAX_BYTES = 8 * 2**20
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, size in [("Dockerfile", 0), ("zeros.bin", 64 * 2**20)]:
            data = fresh_dockerfile().encode() if name == "Dockerfile" else bytes(size)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert len(buffer.getvalue()) < 2**20

    answer = client.create("bomb", buffer.getvalue())

    assert answer.status == 400
    assert "unpacks to more than 8 MB" in answer.json()["context"][0]
    assert not TaskSandbox.objects.filter(run=run).exists()


def test_a_process_on_another_engine_than_the_runs_never_touches_its_task_sandboxes(
    managed, task_images
):
    """A call that reaches a platform process on another worker host than the run's (a web
    replica, another worker host) is refused, 409 naming both hosts, before any build; one
    stopped there (the admin's action) loses only its row, and the run's own host's reaper
    removes the container while the run goes on."""
    run, client = managed
    sandbox = client.create("here", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    Run.objects.filter(pk=run.pk).update(engine="host-b unix:///run/host-b.sock")

    refused = [
        client.create("there", context_tar(fresh_dockerfile())),
        client.call(
            "POST",
            f"/task-sandboxes/{sandbox['id']}/exec",
            b'{"command": "true"}',
            {"Content-Type": "application/json"},
        ),
        client.put_files(sandbox["id"], "/app", tar_of({"a.txt": "A"})),
        client.get_files(sandbox["id"], "/app"),
        client.stop(sandbox["id"]),
    ]

    for answer in refused:
        assert answer.status == 409, answer.body
        assert answer.json()["code"] == "wrong_host"
        detail = answer.json()["detail"]
        assert "worker host host-b (engine unix:///run/host-b.sock)" in detail
        assert f"this platform process is on {worker_host()} " in detail
    assert client.call("GET", f"/task-sandboxes/{sandbox['id']}").json()["status"] == "running"
    assert [row.name for row in TaskSandbox.objects.filter(run=run)] == ["here"]
    assert [c.status for c in task_containers(run.pk)] == ["running"]

    task_sandbox_stop(sandbox=TaskSandbox.objects.get(pk=sandbox["id"]))
    assert TaskSandbox.objects.get(pk=sandbox["id"]).status == "stopped"
    assert [c.status for c in task_containers(run.pk)] == ["running"]  # not this host's

    Run.objects.filter(pk=run.pk).update(engine=run.engine)  # now: the run's own host
    reap()
    assert task_containers(run.pk) == []
    assert Run.objects.get(pk=run.pk).status == "running"


def test_a_rebuilt_base_image_builds_the_task_image_again(managed, task_images, sandbox_settings):
    """The cache key holds the id of the local image the task builds FROM: after the base is
    rebuilt (the sandbox image gaining a package), the same environment/ is built again from
    the new base, not served from the image made from the old one."""
    run, client = managed
    engine = docker.from_env()
    base = f"belvedir-test-base:{secrets.token_hex(6)}"
    sandbox_settings.BELVEDIR_TASK_BASE_IMAGES = [BASE_IMAGE, base]  # the operator allows it
    engine.images.get(BASE_IMAGE).tag(base)
    try:
        context = context_tar(f"FROM {base}\nUSER root\nWORKDIR /app\n")
        first = client.create("old-base", context).json()
        task_images.add(first["image"])
        client.stop(first["id"])
        assert client.create("same", context).json()["cached"] is True
        client.stop(TaskSandbox.objects.get(run=run, name="same").pk)
        newer, _ = engine.images.build(
            fileobj=io.BytesIO(f"FROM {BASE_IMAGE}\nLABEL belvedir.test-rebuilt=1\n".encode()),
            tag=base,
            labels={"belvedir.test": "1"},
            rm=True,
        )

        again = client.create("new-base", context).json()

        task_images.add(again["image"])
        assert again["cached"] is False and again["image"] != first["image"]
        labels = engine.images.get(again["image"]).labels
        assert labels.get("belvedir.test-rebuilt") == "1"  # built FROM the new base
    finally:
        engine.images.remove(base, force=True)


def test_a_transfer_costs_one_process_in_the_sandbox_past_the_first(
    managed, task_images, monkeypatch
):
    """Each exec is a process started in the sandbox (under gVisor a `runsc exec` on the
    host), most of what a file transfer costs: once a container's tar is known, an upload is
    one exec (mkdir and extract), and a download is always one (its size first, then the tar),
    instead of two and three."""
    from docker.api.exec_api import ExecApiMixin

    run, client = managed
    sandbox = client.create("transfers", context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    assert client.put_files(sandbox["id"], "/app/a", tar_of({"a.txt": "A"})).status == 204
    started: list[list[str]] = []
    original = ExecApiMixin.exec_create

    def counted(self, container, cmd, *args, **kwargs):
        started.append(cmd)
        return original(self, container, cmd, *args, **kwargs)

    monkeypatch.setattr(ExecApiMixin, "exec_create", counted)
    count_served(monkeypatch, started)  # or by the sandbox's exec server

    assert client.put_files(sandbox["id"], "/app/b/c", tar_of({"b.txt": "B"})).status == 204
    assert len(started) == 1, started
    got = client.get_files(sandbox["id"], "/app/b")
    assert got.status == 200, got.body
    with tarfile.open(fileobj=io.BytesIO(got.body)) as tar:
        assert tar.extractfile("b/c/b.txt").read() == b"B"
    assert len(started) == 2, started
    assert client.get_files(sandbox["id"], "/app/nothing").status == 404
    assert len(started) == 3, started
    # Past the limit: the size came first, so nothing of the tar is sent.
    monkeypatch.setattr("harbor.api.DOWNLOAD_MAX_BYTES", 4096)
    assert client.exec_lines(sandbox["id"], "head -c 20000 /dev/zero > /app/big")[-1] == {
        "exit_code": 0,
        "timed_out": False,
    }
    big = client.get_files(sandbox["id"], "/app/big")
    assert big.status == 413 and big.json()["code"] == "too_large", big.body
    assert client.get_files(sandbox["id"], "/app/b").status == 200  # under it: still sent
