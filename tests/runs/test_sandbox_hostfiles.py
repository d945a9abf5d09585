"""A quota sandbox's workspace goes in, and its results come out, through its volume's folder on
the worker's host rather than the engine's archive calls; nothing the sandbox wrote is ever
followed out of that folder on the host."""

import io
import os
import tarfile
import uuid
from pathlib import Path

import docker
import pytest
from docker.models.containers import Container

from sandboxes import diskquota, hostfiles
from sandboxes.base import FileKind, tar_directory
from sandboxes.docker import DockerBackend
from tests.runs.test_sandbox_docker import run_to_end, spec_of

MiB = 2**20


# --- reading back -----------------------------------------------------------------------------


def test_a_regular_file_is_read_and_a_missing_one_reported(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "results.json").write_bytes(b'{"score": 1}')

    got = hostfiles.read_file(tmp_path, "repo/results.json", 1024)
    assert (got.kind, got.size, got.content) == (FileKind.FILE, 12, b'{"score": 1}')
    assert hostfiles.read_file(tmp_path, "repo/nothing.json", 1024).kind is FileKind.MISSING
    assert hostfiles.read_file(tmp_path, "gone/results.json", 1024).kind is FileKind.MISSING


def test_nothing_of_a_file_over_the_cap_is_read(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 2000)

    got = hostfiles.read_file(tmp_path, "big", 1000)
    assert got.too_large and got.size == 2000


def test_a_symlink_to_a_host_file_is_reported_never_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host only")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "results.json").symlink_to(secret)

    got = hostfiles.read_file(tmp_path, "repo/results.json", 1024)
    assert got.kind is FileKind.SYMLINK and got.content is None


def test_a_symlinked_folder_on_the_way_is_left_to_the_engine(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "results.json").write_text("{}")
    (tmp_path / "repo").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "file").write_text("")

    assert hostfiles.read_file(tmp_path, "repo/results.json", 1024) is None
    assert hostfiles.read_file(tmp_path, "file/results.json", 1024) is None
    assert hostfiles.read_file(tmp_path, "../results.json", 1024) is None


def test_a_fifo_is_reported_without_being_opened_for_reading(tmp_path):
    os.mkfifo(tmp_path / "results.json")  # reading it would block forever

    got = hostfiles.read_file(tmp_path, "results.json", 1024)
    assert got.kind is FileKind.FIFO and got.content is None


# --- unpacking --------------------------------------------------------------------------------


def test_a_workspace_unpacks_with_its_owners_and_links_kept(tmp_path):
    source = tmp_path / "source"
    (source / "repo" / "sub").mkdir(parents=True)
    (source / "repo" / "sub" / "data.txt").write_text("hello\n")
    (source / "repo" / "rel").symlink_to("sub/data.txt")
    (source / "repo" / "abs").symlink_to("/usr/bin/python3")  # resolved in the sandbox only
    dest = tmp_path / "dest"
    dest.mkdir()

    assert hostfiles.unpack_workspace(tar_directory(source, "."), dest)

    assert (dest / "repo" / "sub" / "data.txt").read_text() == "hello\n"
    assert os.readlink(dest / "repo" / "abs") == "/usr/bin/python3"
    if os.geteuid() == 0:
        assert (dest / "repo" / "sub" / "data.txt").stat().st_uid == 1000


def archive_of(*members: tuple[str, bytes | str]) -> bytes:
    """A tar of (name, file bytes), (name, "-> target") symlink and (name, "=> target") hard
    link entries."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, body in members:
            info = tarfile.TarInfo(name)
            if isinstance(body, str):
                kind = tarfile.SYMTYPE if body.startswith("-> ") else tarfile.LNKTYPE
                info.type, info.linkname = kind, body[3:]
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


@pytest.mark.parametrize(
    "archive",
    [
        archive_of(("out", "-> /tmp"), ("out/planted", b"x")),
        archive_of(("../planted", b"x")),
        archive_of(("/planted", b"x")),
        archive_of(("out", "-> /etc/passwd"), ("hard", "=> out")),
    ],
    ids=["beneath a symlink", "climbing out", "absolute", "hard link to a symlink"],
)
def test_an_archive_that_could_write_outside_is_left_to_the_engine(tmp_path, archive):
    dest = tmp_path / "dest"
    dest.mkdir()

    assert not hostfiles.unpack_workspace(archive, dest)
    assert list(dest.iterdir()) == []
    assert not Path("/tmp/planted").exists()


# --- through the Docker backend with a quota volume ---------------------------------------------


@pytest.fixture
def quota_sandbox(tmp_path, monkeypatch):
    """Launch quota sandboxes whose engine archive calls fail the test, unless `engine_ok`."""
    client = docker.from_env()
    data_dir = tmp_path / "sandboxes"
    data_dir.mkdir()
    backend = DockerBackend(client, instance=f"test-{uuid.uuid4().hex[:8]}", data_dir=data_dir)
    engine_calls: list[str] = []
    original_get, original_put = Container.get_archive, client.api.put_archive

    def get_archive(self, path, *args, **kwargs):
        engine_calls.append(f"get {path}")
        return original_get(self, path, *args, **kwargs)

    def put_archive(container, path, data):
        engine_calls.append(f"put {path}")
        return original_put(container, path, data)

    monkeypatch.setattr(Container, "get_archive", get_archive)
    monkeypatch.setattr(client.api, "put_archive", put_archive)
    made = []

    def launch(command: str, **overrides):
        handle = backend.launch(spec_of(command, disk_bytes=256 * MiB, **overrides))
        made.append(handle)
        return handle

    launch.backend, launch.engine_calls = backend, engine_calls
    yield launch
    for handle in made:
        backend.remove(handle)
    for name in diskquota.volume_names(root=data_dir):
        diskquota.release(root=data_dir, name=name)
    client.close()


@pytest.mark.docker
def test_a_quota_sandbox_gets_its_workspace_and_gives_its_results_without_the_engine(
    quota_sandbox, tmp_path
):
    workspace = tmp_path / "workspace"
    (workspace / "repo").mkdir(parents=True)
    (workspace / "repo" / "run.sh").write_text("echo ran\n")
    handle = quota_sandbox(
        "cd repo && stat -c '%u:%g' run.sh && sh run.sh && echo '{\"score\": 1}' > results.json"
        " && mkfifo fifo && ln -s /etc/shadow shadow",
        workspace=tar_directory(workspace, "."),
    )
    assert run_to_end(quota_sandbox.backend, handle) == "1000:1000\nran\n"

    paths = [f"/workspace/repo/{name}" for name in ("results.json", "fifo", "shadow", "none")]
    got = quota_sandbox.backend.collect(handle, paths, 1024)

    assert got[paths[0]].content == b'{"score": 1}\n'
    assert [got[p].kind for p in paths[1:]] == [FileKind.FIFO, FileKind.SYMLINK, FileKind.MISSING]
    assert quota_sandbox.engine_calls == []


@pytest.mark.docker
def test_a_path_through_a_symlink_is_resolved_by_the_engine_inside_the_sandbox(quota_sandbox):
    handle = quota_sandbox(
        "mkdir /tmp/real && echo '{}' > /tmp/real/results.json && ln -s /tmp/real /workspace/repo"
    )
    run_to_end(quota_sandbox.backend, handle)

    [got] = quota_sandbox.backend.collect(handle, ["/workspace/repo/results.json"], 1024).values()

    assert got.kind is FileKind.FILE and got.content == b"{}\n"
    assert quota_sandbox.engine_calls == ["get /workspace/repo/results.json"]
