"""A task sandbox's exec server (sandboxes/taskd.c) as a task and its neighbours meet it: the
binary is the host's and read-only, nothing on the sandbox network but the platform reaches
it, a wrong token runs nothing, the token is not handed to the commands, the platform's
deadline ends the command itself, and the engine's own semantics hold where the server
declines (users, working directories). Real Docker, gVisor, through the gateway."""

import contextlib
import hashlib
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import docker
import pytest

from harbor.models import TaskSandbox
from sandboxes import taskd
from sandboxes.base import SandboxSpec
from tests.helpers.task_sandboxes import context_tar, fresh_dockerfile, tar_of

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


@pytest.fixture
def engine():
    client = docker.from_env()
    yield client
    client.close()


def one(client, task_images, name="served") -> tuple[dict, str]:
    sandbox = client.create(name, context_tar(fresh_dockerfile())).json()
    task_images.add(sandbox["image"])
    return sandbox, TaskSandbox.objects.get(pk=sandbox["id"]).container_id


def address(engine, container_id: str) -> tuple[str, str]:
    attrs = engine.api.inspect_container(container_id)
    networks = attrs["NetworkSettings"]["Networks"]
    return next(n["IPAddress"] for n in networks.values()), attrs["Config"]["Labels"][taskd.LABEL]


def test_a_task_sandboxs_commands_go_by_its_server_not_docker_exec(
    managed, task_images, engine_started
):
    run, client = managed
    sandbox, container_id = one(client, task_images)
    engine_started.clear()

    lines = client.exec_lines(sandbox["id"], "echo out; echo err >&2; exit 3")

    assert lines == [
        {"stream": "stdout", "data": "out\n"},
        {"stream": "stderr", "data": "err\n"},
        {"exit_code": 3, "timed_out": False},
    ]
    assert engine_started == []  # no `docker exec`


def test_the_server_is_the_hosts_static_build_mounted_read_only(managed, task_images):
    run, client = managed
    sandbox, _ = one(client, task_images)
    before = hashlib.sha256(taskd.BUILT.read_bytes()).hexdigest()

    lines = client.exec_lines(
        sandbox["id"], f"cp /bin/true {taskd.MOUNT} || echo x >> {taskd.MOUNT} || rm {taskd.MOUNT}"
    )

    assert lines[-1]["exit_code"] != 0
    assert "Read-only file system" in "".join(line.get("data", "") for line in lines)
    assert hashlib.sha256(taskd.BUILT.read_bytes()).hexdigest() == before
    with taskd.BUILT.open("rb") as binary:
        elf = binary.read(64)
        phoff, phentsize, phnum = (
            int.from_bytes(elf[32:40], "little"),
            int.from_bytes(elf[54:56], "little"),
            int.from_bytes(elf[56:58], "little"),
        )
        binary.seek(phoff)
        headers = binary.read(phentsize * phnum)
    kinds = {
        int.from_bytes(headers[i : i + 4], "little") for i in range(0, len(headers), phentsize)
    }
    assert 3 not in kinds  # no PT_INTERP: no loader or libc of the image's is needed


def test_another_sandbox_on_the_network_cannot_reach_a_task_sandboxs_server(
    managed, task_images, engine
):
    run, client = managed
    target, target_container = one(client, task_images, "target")
    neighbour, _ = one(client, task_images, "neighbour")
    ip, _ = address(engine, target_container)

    probe = (
        f"python3 -c \"import socket; socket.create_connection(('{ip}', {taskd.PORT}), "
        "timeout=3); print('reached')\""
    )
    lines = client.exec_lines(neighbour["id"], probe)

    assert lines[-1]["exit_code"] != 0
    assert not [line for line in lines if line.get("stream") == "stdout"]
    assert "timed out" in "".join(line.get("data", "") for line in lines)  # dropped, not refused


def attempt(ip: str, token: str, hello: bytes, argv: list[str]) -> bytes:
    """A connection proving `token` (hello: what opens it): what the server answers to it."""
    with socket.create_connection((ip, taskd.PORT), timeout=10) as sock:
        try:
            sock.sendall(hello)
            answer = sock.recv(48, socket.MSG_WAITALL)
            body = taskd.request(argv, cwd=None, env={}, user="")
            mine = taskd.proof(token, b"client", answer[:16], hello[4:])
            sock.sendall(mine + len(body).to_bytes(4, "big") + body)
            return sock.recv(100)
        except (ConnectionResetError, BrokenPipeError):
            return b""  # closed on (reset, or before the request): as unanswered


def test_a_connection_that_cannot_prove_the_token_runs_nothing(managed, task_images, engine):
    run, client = managed
    sandbox, container_id = one(client, task_images)
    ip, token = address(engine, container_id)
    wrong = ("0" if token[0] != "0" else "1") + token[1:]
    touch = ["sh", "-c", "touch /tmp/pwned"]
    nonce = b"BTD2" + b"n" * 16
    for given in (wrong, token[:-1], "", token + "0"):
        assert attempt(ip, given, nonce, touch) == b""  # closed on, unanswered
    assert attempt(ip, token, b"BTD1" + b"n" * 16, touch) == b""  # the old protocol
    with socket.create_connection((ip, taskd.PORT), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        with contextlib.suppress(ConnectionResetError):  # closed on with it unread
            assert sock.recv(100) == b""
    with socket.create_connection((ip, taskd.PORT), timeout=10) as sock:
        sock.sendall(nonce)
        answer = sock.recv(48, socket.MSG_WAITALL)
    assert answer[16:] == taskd.proof(token, b"server", b"n" * 16, answer[:16])  # it proves
    assert token.encode() not in answer

    lines = client.exec_lines(sandbox["id"], "test -e /tmp/pwned")

    assert lines == [{"exit_code": 1, "timed_out": False}]
    assert attempt(ip, token, nonce, ["sh", "-c", "touch /tmp/ok"]).startswith(b"x")
    assert client.exec_lines(sandbox["id"], "test -e /tmp/ok")[-1]["exit_code"] == 0


def test_the_token_is_in_no_commands_env(managed, task_images, engine):
    """Neither by the server nor by the engine where the server declines (the token is the
    server's argument, not the container's env)."""
    run, client = managed
    context = context_tar(fresh_dockerfile() + "USER sandbox\n")
    sandbox = client.create("not-root", context).json()
    task_images.add(sandbox["image"])
    container_id = TaskSandbox.objects.get(pk=sandbox["id"]).container_id
    _, token = address(engine, container_id)

    served = client.exec_lines(sandbox["id"], "env")  # by the server, as the image's user
    by_engine = client.exec_lines(sandbox["id"], "env", user="root")  # declined: the engine's

    for lines in (served, by_engine):
        printed = "".join(line.get("data", "") for line in lines)
        assert "PATH=" in printed
        assert token not in printed


def test_a_command_that_closes_its_output_is_still_killed_at_its_limit(managed, task_images):
    run, client = managed
    sandbox, _ = one(client, task_images)
    begin = time.monotonic()

    lines = client.exec_lines(
        sandbox["id"], "exec >/dev/null 2>&1 </dev/null; sleep 3600", timeout_sec=2
    )

    assert lines == [{"exit_code": 137, "timed_out": True}]
    assert time.monotonic() - begin < 6  # the limit, not the platform's grace after it
    left = client.exec_lines(sandbox["id"], "ps -eo args | grep -c '^sleep 3600' || true")
    assert left[0]["data"].strip() == "0"


def test_the_platforms_deadline_kills_a_command_with_no_timeout_of_its_own(
    managed, task_images, engine, monkeypatch
):
    run, client = managed
    sandbox, container_id = one(client, task_images)
    monkeypatch.setattr(taskd, "GRACE_SECONDS", 1.0)
    begin = time.monotonic()

    served = taskd.run(
        engine, container_id, ["sleep", "3600"], cwd=None, env={}, timeout=1.0, user=""
    )
    got = list(served)

    assert got == [{"exit_code": -1, "timed_out": True}]
    assert time.monotonic() - begin < 10
    for _ in range(50):
        lines = client.exec_lines(sandbox["id"], "ps -eo args | grep -c '^sleep 3600' || true")
        if lines[0]["data"].strip() == "0":
            break
        time.sleep(0.2)
    assert lines[0]["data"].strip() == "0"


def engine_exec(engine, container_id: str, command: str, user: str) -> str:
    """What `docker exec` prints for `command` as `user` (the engine's own semantics)."""
    created = engine.api.exec_create(container_id, ["bash", "-c", command], user=user)
    return engine.api.exec_start(created["Id"]).decode()


PROBE = 'echo "$(id -u) $(id -g) $(id -G) $HOME"'
# Groups that list users as members: their supplementary groups, as the engine resolves them.
MEMBERS = "RUN printf 'extra:x:2000:sandbox,nobody\\nother:x:2001:sandbox\\n' >> /etc/group\n"


@pytest.mark.parametrize(
    "user",
    [
        *["", "root", "0", "nobody", "sandbox", "1234", "1234:1000", "nobody:sandbox", "0:0"],
        *["sandbox:extra", "1000", "sandbox:2001", "nobody:nogroup"],
    ],
)
def test_users_are_switched_as_docker_exec_switches_them(
    managed, task_images, engine_started, engine, user
):
    run, client = managed
    sandbox = client.create("users", context_tar(fresh_dockerfile() + MEMBERS)).json()
    task_images.add(sandbox["image"])
    container_id = TaskSandbox.objects.get(pk=sandbox["id"]).container_id
    engine_started.clear()

    lines = client.exec_lines(sandbox["id"], PROBE, user=user)

    assert engine_started == []
    assert lines[0]["data"] == engine_exec(engine, container_id, PROBE, user)


def test_what_the_server_declines_goes_to_the_engine_with_its_own_message(
    managed, task_images, engine_started
):
    run, client = managed
    sandbox, _ = one(client, task_images)
    engine_started.clear()

    nosuch = client.exec_lines(sandbox["id"], "true", user="nosuch")
    nowhere = client.exec_lines(sandbox["id"], "true", cwd="/does/not/exist")

    assert "unable to find user nosuch" in nosuch[0].get("data", ""), nosuch
    assert nosuch[-1]["exit_code"] == 126
    assert "/does/not/exist" in nowhere[0].get("data", ""), nowhere
    assert nowhere[-1]["exit_code"] == 126
    assert len(engine_started) == 2  # each once, by `docker exec`


def test_a_server_running_as_the_images_own_user_leaves_other_users_to_the_engine(
    managed, task_images, engine_started, engine
):
    run, client = managed
    context = context_tar(fresh_dockerfile() + "USER sandbox\n")
    sandbox = client.create("not-root", context).json()
    task_images.add(sandbox["image"])
    engine_started.clear()

    own = client.exec_lines(sandbox["id"], PROBE)
    root = client.exec_lines(sandbox["id"], PROBE, user="root")

    assert own[0]["data"].startswith("1000 1000 ")
    assert root[0]["data"].startswith("0 0 ")
    assert len(engine_started) == 1  # root's, by `docker exec`: the server cannot switch to it


def test_an_image_with_no_shell_or_libc_runs_the_server(engine, tmp_path, sandbox_settings):
    """A task image need not have Python, a shell or a libc: the server is static."""
    from belvedir.sandbox_config import get_backend, spec_from_settings

    source = tmp_path / "hello.c"
    source.write_text('#include <stdio.h>\nint main(void) { puts("hello"); return 7; }\n')
    subprocess.run(["gcc", "-static", "-o", tmp_path / "hello", source], check=True)
    with tarfile.open(tmp_path / "root.tar", "w") as tar:
        tar.add(tmp_path / "hello", arcname="hello")
        for folder in ("etc", "tmp", "dev", "proc", "sys"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
    tag = f"belvedir-test-scratch:{tmp_path.name.lower()[-20:]}"
    with Path(tmp_path / "root.tar").open("rb") as data:
        engine.api.import_image_from_data(data.read(), repository=tag)
    backend = get_backend()
    spec: SandboxSpec = spec_from_settings(
        run_id="scratch", image=tag, command=["/hello"], user="", exec_server=True
    )
    handle = backend.launch(spec)
    try:
        for _ in range(50):  # until the server listens
            served = taskd.run(engine, handle.id, ["/hello"], cwd=None, env={}, timeout=30, user="")
            if served is not None:
                break
            time.sleep(0.1)
        got = list(served)
    finally:
        backend.kill(handle)
        backend.remove(handle)
        engine.images.remove(tag, force=True)

    assert got == [{"stream": "stdout", "data": "hello\n"}, {"exit_code": 7, "timed_out": False}]


def test_uploads_arrive_whole_while_their_output_is_read_beside_them(managed, task_images):
    """An upload's body is sent from one thread while another reads the server's frames: a
    socket timeout changed under the send once cut about one body in seven short (EAGAIN,
    taken for tar's end: `tar: Unexpected EOF in archive`)."""
    run, client = managed
    sandbox, _ = one(client, task_images)
    body = tar_of({"big": "b" * 3_000_000})

    for k in range(20):
        assert client.put_files(sandbox["id"], f"/tmp/in{k}", body).status == 204, k

    sizes = client.exec_lines(sandbox["id"], "cat /tmp/in*/big | wc -c")
    assert sizes[0]["data"].strip() == str(20 * 3_000_000)
