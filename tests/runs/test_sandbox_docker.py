"""The Docker sandbox backend against the real engine and the real sandbox image.

Needs `scripts/ensure-docker.sh` and `python manage.py sandbox_image` first. Sandboxes use
host networking and talk to 127.0.0.1 only.
"""

from __future__ import annotations

import http.server
import io
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from belvedir.sandbox_config import image_config
from sandboxes import image_recipe
from sandboxes.base import (
    LABEL_RUN_ID,
    FileKind,
    SandboxBackend,
    SandboxError,
    SandboxHandle,
    SandboxSpec,
    kill_run_sandboxes,
    tar_directory,
    tar_files,
)
from sandboxes.docker import DockerBackend
from sandboxes.image import build_image
from sandboxes.image_recipe import (
    DOCKERFILE,
    IMAGE_ENV,
    LABEL_RECIPE_DIGEST,
    NODE_SDK_INSTALL,
    PACKAGES,
    VENV_PACKAGES,
    ImageConfig,
    recipe_digest,
)

pytestmark = pytest.mark.docker

IMAGE = image_config().image
# Unique per process, so parallel workers only clean up their own sandboxes.
RUN_PREFIX = f"run_pytest_{uuid.uuid4().hex[:6]}_"


@pytest.fixture(scope="module")
def backend() -> Iterator[DockerBackend]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"Docker is not running ({exc}); run scripts/ensure-docker.sh")
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{IMAGE} is missing; run `python manage.py sandbox_image`")
    backend = DockerBackend(client)
    yield backend
    for info in backend.list_by_label():
        if info.run_id.startswith(RUN_PREFIX):
            backend.remove(SandboxHandle(id=info.id, run_id=info.run_id))


Sandbox = Callable[..., SandboxHandle]


def spec_of(command: str | list[str], **overrides: object) -> SandboxSpec:
    """A spec with test limits on the host network; `overrides` replace any field."""
    options: dict = {
        "run_id": f"{RUN_PREFIX}{uuid.uuid4().hex[:12]}",
        "image": IMAGE,
        "command": ["sh", "-c", command] if isinstance(command, str) else command,
        "env": {"BELVEDIR_RUN_ID": "run_test"},
        "workdir": "/workspace",
        "network": "host",
        "cpus": 1.0,
        "memory": "256m",
        "pids": 64,
    }
    options.update(overrides)
    return SandboxSpec(**options)


@pytest.fixture
def sandbox(backend: DockerBackend) -> Iterator[Sandbox]:
    """Launch sandboxes with test limits; every one is removed after the test."""
    made: list[SandboxHandle] = []

    def launch(command: str | list[str], **overrides: object) -> SandboxHandle:
        handle = backend.launch(spec_of(command, **overrides))
        made.append(handle)
        return handle

    yield launch
    for handle in made:
        backend.remove(handle)


def run_to_end(backend: DockerBackend, handle: SandboxHandle, timeout: float = 60) -> str:
    """Wait for the launched sandbox; its combined output."""
    code = backend.wait(handle, timeout=timeout)
    assert code is not None, "the sandbox did not finish in time"
    output = b"".join(backend.stream_logs(handle)).decode()
    assert code == 0, f"exit {code}: {output}"
    return output


def inspect(backend: DockerBackend, handle: SandboxHandle) -> dict:
    return backend.client.api.inspect_container(handle.id)


def test_docker_backend_implements_the_sandbox_interface(backend):
    assert isinstance(backend, SandboxBackend)


def test_ping_answers_when_the_engine_is_up_and_says_why_when_it_is_not(backend, monkeypatch):
    backend.ping()
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError, match="could not reach the Docker engine"):
        DockerBackend().ping()


def test_sandbox_runs_as_uid_1000_with_no_capabilities(backend, sandbox):
    handle = sandbox("id -u; id -g; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status")
    output = run_to_end(backend, handle)
    lines = output.split("\n")
    assert lines[:2] == ["1000", "1000"]
    caps = dict(re.findall(r"^(Cap\w+):\s+([0-9a-f]+)$", output, re.MULTILINE))
    assert caps == {"CapEff": "0" * 16, "CapPrm": "0" * 16, "CapBnd": "0" * 16}


def test_sandbox_cannot_gain_privileges(backend, sandbox):
    output = run_to_end(backend, sandbox("grep NoNewPrivs /proc/self/status"))
    assert re.search(r"NoNewPrivs:\s+1", output)


def test_sandbox_host_config_carries_the_limits_and_no_privileges(backend, sandbox):
    handle = sandbox("true", cpus=0.5, memory="256m", pids=40)
    host = inspect(backend, handle)["HostConfig"]
    assert host["Memory"] == 256 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["PidsLimit"] == 40
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Privileged"] is False
    assert host["AutoRemove"] is False
    assert host["NetworkMode"] == "host"
    assert not host.get("Binds"), "nothing from the host may be mounted"
    assert inspect(backend, handle)["Config"]["User"] == "1000:1000"


def test_sandbox_refuses_processes_past_the_pids_limit(backend, sandbox):
    program = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while n < 200:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(2)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print('forked', n)\n"
    )
    output = run_to_end(backend, sandbox(["python3", "-c", program], pids=24))
    forked = int(re.search(r"forked (\d+)", output).group(1))
    assert 0 < forked < 24


def test_sandbox_is_labelled_with_its_run_id(backend, sandbox):
    handle = sandbox("true")
    labels = inspect(backend, handle)["Config"]["Labels"]
    assert labels[LABEL_RUN_ID] == handle.run_id
    assert labels["belvedir.managed"] == "1"


def test_environment_and_workdir_reach_the_command(backend, sandbox):
    handle = sandbox('pwd; echo "$BELVEDIR_RUN_ID"', env={"BELVEDIR_RUN_ID": "run_abc"})
    assert run_to_end(backend, handle) == "/workspace\nrun_abc\n"


def test_logs_stream_in_order_as_they_arrive(backend, sandbox):
    handle = sandbox("for i in 1 2 3; do echo $i; sleep 0.5; done; echo done >&2")
    arrivals: list[tuple[float, bytes]] = []
    started = time.monotonic()
    for chunk in backend.stream_logs(handle):
        arrivals.append((time.monotonic() - started, chunk))
    assert b"".join(chunk for _, chunk in arrivals) == b"1\n2\n3\ndone\n"
    first = next(at for at, chunk in arrivals if b"1" in chunk)
    last = next(at for at, chunk in arrivals if b"3" in chunk)
    assert last - first >= 0.8, f"output came in one lump: {arrivals}"


def test_the_output_stream_holds_every_byte_of_a_flood_and_what_follows_it(backend, sandbox):
    # 8 MB at full speed, then a marker: the log file rotates at 10 MB and a reader that
    # falls behind must slow the writer down instead of losing output.
    handle = sandbox("head -c 8388608 /dev/zero | tr '\\0' x; echo; echo END-MARKER")
    output = b"".join(backend.stream_logs(handle))
    assert backend.wait(handle, timeout=60) == 0
    assert len(output) == 8 * 1024 * 1024 + 1 + len(b"END-MARKER\n")
    assert output.endswith(b"x\nEND-MARKER\n")


def test_the_first_output_of_a_quick_command_is_never_missed(backend, sandbox):
    handles = [sandbox(f"echo first {i}") for i in range(5)]
    for i, handle in enumerate(handles):
        assert b"".join(backend.stream_logs(handle)) == f"first {i}\n".encode()


def test_wait_returns_the_exit_code(backend, sandbox):
    handle = sandbox("exit 3")
    assert backend.wait(handle, timeout=30) == 3


def test_wait_gives_up_after_the_timeout_and_kill_stops_the_sandbox_in_seconds(backend, sandbox):
    handle = sandbox("sleep 300")
    started = time.monotonic()
    assert backend.wait(handle, timeout=1) is None
    assert 0.9 <= time.monotonic() - started < 5

    started = time.monotonic()
    backend.kill(handle)
    assert backend.wait(handle, timeout=10) == 137
    assert time.monotonic() - started < 5
    backend.kill(handle)  # killing a stopped sandbox is fine


def test_collect_reads_results_json_after_the_sandbox_exited(backend, sandbox):
    handle = sandbox("""echo '{"score": 0.5}' > /workspace/results.json""")
    run_to_end(backend, handle)
    [got] = backend.collect(handle, ["/workspace/results.json"], 256 * 1024).values()
    assert got.kind is FileKind.FILE and got.content == b'{"score": 0.5}\n' and got.size == 15


def test_collect_says_which_files_are_missing(backend, sandbox):
    handle = sandbox("touch /workspace/here")
    run_to_end(backend, handle)
    got = backend.collect(handle, ["/workspace/results.json", "/workspace/here"], 1024)
    assert got["/workspace/results.json"].kind is FileKind.MISSING
    assert got["/workspace/results.json"].content is None
    assert got["/workspace/here"].kind is FileKind.FILE and got["/workspace/here"].content == b""


def test_collect_reads_nothing_of_a_file_over_max_bytes(backend, sandbox):
    handle = sandbox("head -c 2000 /dev/zero > /workspace/results.json")
    run_to_end(backend, handle)
    [over] = backend.collect(handle, ["/workspace/results.json"], 1000).values()
    assert over.too_large and over.size == 2000 and over.content is None
    [fits] = backend.collect(handle, ["/workspace/results.json"], 2000).values()
    assert not fits.too_large and fits.content == b"\0" * 2000


def test_collect_tells_directories_symlinks_and_fifos_from_files(backend, sandbox):
    handle = sandbox(
        "mkdir /workspace/dir && ln -s /etc/passwd /workspace/link && mkfifo /workspace/fifo"
    )
    run_to_end(backend, handle)
    paths = ["/workspace/dir", "/workspace/link", "/workspace/fifo"]
    got = backend.collect(handle, paths, 1024)
    assert [got[p].kind for p in paths] == [FileKind.DIRECTORY, FileKind.SYMLINK, FileKind.FIFO]
    assert all(got[p].content is None and not got[p].too_large for p in paths)


def test_the_workspace_is_unpacked_into_the_workdir_owned_by_uid_1000(
    backend, sandbox, tmp_path: Path
):
    workspace = tmp_path / "workspace"
    repo = workspace / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "sub" / "data.txt").write_text("hello\n")
    (repo / "link").symlink_to("sub/data.txt")

    handle = sandbox(
        "cd /workspace/repo && find . -exec stat -c '%u:%g %n' {} + | sort"
        " && ./run.sh && cat link && touch new-file && echo writable",
        workspace=tar_directory(workspace, "."),
    )
    output = run_to_end(backend, handle)

    owners = {line.split()[0] for line in output.splitlines() if line.startswith(("0", "1"))}
    assert owners == {"1000:1000"}
    for name in ("./run.sh", "./sub/data.txt", "./link"):
        assert f"1000:1000 {name}" in output
    assert output.endswith("ran\nhello\nwritable\n")


def test_a_workspace_of_in_memory_files_can_come_from_a_tar_file(backend, sandbox, tmp_path: Path):
    archive = tmp_path / "files.tar"
    archive.write_bytes(tar_files({"tasks/tasks.jsonl": b'{"id": 1}\n'}))
    handle = sandbox(
        "stat -c '%u:%g %n' tasks tasks/tasks.jsonl && cat tasks/tasks.jsonl", workspace=archive
    )
    assert run_to_end(backend, handle) == (
        '1000:1000 tasks\n1000:1000 tasks/tasks.jsonl\n{"id": 1}\n'
    )


def test_a_launch_that_fails_after_the_create_leaves_nothing_behind(backend):
    spec = spec_of("true", workspace=b"this is not a tar archive" * 40)
    with pytest.raises(SandboxError, match="copy the workspace"):
        handle = backend.launch(spec)
        backend.remove(handle)  # only if the test is about to fail
    assert backend.list_by_label({LABEL_RUN_ID: spec.run_id}) == []


def test_the_runtime_of_the_spec_reaches_the_engine(backend, sandbox):
    handle = sandbox("true", runtime="runc")
    assert inspect(backend, handle)["HostConfig"]["Runtime"] == "runc"


def test_ls_and_stat_work_under_gvisor(backend, sandbox):
    """Debian 12's runsc refused coreutils 9's statx flags (`ls /`: Invalid argument); the
    pinned runsc of scripts/gvisor.sh does not. (gVisor's own threads count against the pids
    limit on the host: the platform's default, not this file's 64 for runc.)"""
    command = "ls -la / | grep -c ' tmp$'; stat -c %F /workspace"
    handle = sandbox(command, runtime="runsc", pids=512)
    assert inspect(backend, handle)["HostConfig"]["Runtime"] == "runsc"
    assert run_to_end(backend, handle).split() == ["1", "directory"]


def test_list_by_label_finds_the_sandbox_and_its_state(backend, sandbox):
    handle = sandbox("sleep 30")
    assert backend.list_by_label({LABEL_RUN_ID: handle.run_id}) == [
        (handle.run_id, handle.id, "running")
    ]
    backend.kill(handle)
    backend.wait(handle, timeout=10)
    [info] = backend.list_by_label({LABEL_RUN_ID: handle.run_id})
    assert info.status == "exited"
    assert handle.id in {info.id for info in backend.list_by_label()}


def test_killing_a_runs_sandboxes_kills_that_run_only(backend, sandbox):
    target, bystander = sandbox("sleep 300"), sandbox("sleep 300")
    assert kill_run_sandboxes(backend, target.run_id) == 1
    assert backend.wait(target, timeout=10) == 137
    [info] = backend.list_by_label({LABEL_RUN_ID: bystander.run_id})
    assert info.status == "running"
    assert kill_run_sandboxes(backend, target.run_id) == 0


def test_remove_leaves_nothing_behind(backend, sandbox):
    handle = sandbox("sleep 300")
    backend.remove(handle)
    assert backend.list_by_label({LABEL_RUN_ID: handle.run_id}) == []
    with pytest.raises(docker.errors.NotFound):
        backend.client.containers.get(handle.id)
    backend.remove(handle)  # removing twice is fine
    with pytest.raises(SandboxError, match="no longer exists"):
        backend.collect(handle, ["/workspace/results.json"], 1024)


def test_launch_with_a_missing_image_says_how_to_build_it(sandbox):
    with pytest.raises(SandboxError, match="run `python manage.py sandbox_image`"):
        sandbox("true", image="belvedir-sandbox:does-not-exist")


def test_sandbox_on_the_host_network_reaches_a_server_on_127_0_0_1(backend, sandbox):
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the host")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        handle = sandbox(f"curl -sS http://127.0.0.1:{port}/")
        assert run_to_end(backend, handle) == "hello from the host"
    finally:
        server.shutdown()


def test_image_has_git_python_node_and_the_host_ca_bundle(backend, sandbox):
    handle = sandbox(
        "git --version && python --version && node --version && npm --version"
        " && pip --version && touch /opt/venv/writable && echo ok"
    )
    output = run_to_end(backend, handle)
    assert output.startswith("git version ")
    assert "Python 3." in output and "/opt/venv/" in output and output.endswith("ok\n")
    host_bundle = Path(image_config().ca_bundle).read_bytes()
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    assert backend.collect(handle, [bundle], 4 << 20)[bundle].content == host_bundle


def test_image_has_the_node_sdk_under_both_names(backend, sandbox):
    """Offline, from the workspace: an ES module imports `belvedir` and `@fractalresearch/loop`
    (found in /node_modules), require() finds them on NODE_PATH; the same build under each."""
    handle = sandbox(
        'node --input-type=module -e \'import * as a from "belvedir";'
        ' import * as b from "@fractalresearch/loop";'
        " console.log(typeof a.withSession, typeof b.withSession, a.VERSION === b.VERSION)'"
        ' && cd / && node -e \'console.log(Object.keys(require("belvedir")).join(","))\''
    )
    assert run_to_end(backend, handle).split() == [
        "function",
        "function",
        "true",
        "DEFAULT_BASE_URL,VERSION,initialize,withSession,task,reportOutcome,flush",
    ]


def test_sandbox_image_returns_at_once_when_the_image_exists():
    lines: list[str] = []
    result = build_image(config=image_config(), say=lines.append)
    assert result.recipe == "existing"
    assert result.seconds < 5
    assert "already exists" in lines[0]


def test_an_image_built_from_another_recipe_is_built_again(backend):
    stale = f"belvedir-sandbox-stale-{uuid.uuid4().hex[:8]}:test"
    dockerfile = f"FROM {IMAGE}\nLABEL {LABEL_RECIPE_DIGEST}=an-older-recipe\n"
    backend.client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=stale, rm=True)
    lines: list[str] = []
    try:
        # An unknown recipe stops the build right after the decision to build, so the test
        # sees the decision without building a whole image.
        with pytest.raises(SandboxError, match="unknown recipe"):
            build_image(config=ImageConfig(image=stale), recipe="none", say=lines.append)
    finally:
        backend.client.images.remove(stale, force=True)
    assert "was built from another recipe (an-older-recipe, now " in lines[0], lines


def test_the_recipe_digest_follows_the_node_sdk_the_image_installs(tmp_path, monkeypatch):
    sdk = tmp_path / "node"
    shutil.copytree(image_recipe.NODE_SDK, sdk, ignore=shutil.ignore_patterns("node_modules"))
    monkeypatch.setattr(image_recipe, "NODE_SDK", sdk)
    before = recipe_digest()
    assert recipe_digest() == before
    (sdk / "dist" / "esm" / "index.js").write_text("// another build\n")
    assert recipe_digest() != before


def test_dockerfile_sets_the_same_environment_and_packages_as_the_offline_recipe():
    text = DOCKERFILE.read_text()
    env = dict(re.findall(r"^ENV (\w+)=(\S+)$", text, re.MULTILINE))
    assert env == IMAGE_ENV
    install = re.search(r"--no-install-recommends \\?\s*(.*?)\s*&&", text, re.DOTALL)
    assert sorted(install.group(1).replace("\\", " ").split()) == sorted(PACKAGES)
    venv = re.search(r"/opt/venv/bin/pip install .*?\.crt \\\s*(.*?)\s*&&", text, re.DOTALL)
    assert venv.group(1).replace("\\", " ").split() == list(VENV_PACKAGES)
    node = re.search(r"^RUN (install -d /opt/belvedir-node.*?)\n\n", text, re.DOTALL | re.MULTILINE)
    assert node.group(1).replace("\\\n", " ").split() == NODE_SDK_INSTALL.split()
