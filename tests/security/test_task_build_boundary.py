"""Task-image builds inside the tenant boundary (issue 21, docs/task-sandboxes.md "What a
build may touch"), attacked as a user with a managed Harbor run's key would: through the
task-sandbox API and the sandbox gateway, with a Dockerfile of their own. The engine's
builder works outside the sandbox (the host's network, every image the engine holds, the
host's disk), so none of what it does for a build may reach past the task's own context,
the allowed bases and the task's disk limit."""

from __future__ import annotations

import gzip
import io
import secrets
import socket
import tarfile
import threading

import docker
import pytest

from tests.helpers.task_sandboxes import BASE_IMAGE, context_tar, managed_client

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]
MiB = 2**20


@pytest.fixture
def attacker(owner, sandbox_settings, task_images):
    return managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)


@pytest.fixture
def victim(outsider, sandbox_settings):
    return managed_client(outsider, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)


@pytest.fixture
def engine():
    client = docker.from_env()
    yield client
    client.close()


class Listener:
    """A server on the host's 127.0.0.1 that a build must never reach; counts connections."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                peer, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            body = b"host-only secret"
            peer.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                % (len(body), body)
            )
            peer.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.socket.close()


def marked(dockerfile_body: str) -> tuple[str, str]:
    """A Dockerfile FROM the sandbox image with a marker label every image it makes carries."""
    marker = secrets.token_hex(8)
    return marker, f"FROM {BASE_IMAGE}\nLABEL belvedir.test-marker={marker}\n{dockerfile_body}"


def images_marked(engine, marker: str) -> list:
    return engine.images.list(all=True, filters={"label": f"belvedir.test-marker={marker}"})


def refusal(answer) -> str:
    assert answer.status == 400, (answer.status, answer.body[:500])
    return " ".join(answer.json()["context"])  # a 400 names the field: the context


@pytest.mark.parametrize(
    "add",
    [
        "ADD http://127.0.0.1:{port}/secret /secret",
        'ADD ["http://127.0.0.1:{port}/secret", "/secret"]',
        "ARG SOURCE=http://127.0.0.1:{port}/secret\nADD $SOURCE /secret",
        "ADD\thttp://127.0.0.1:{port}/secret /secret",
        'ADD "http://127.0.0.1:{port}/secret" /secret',
        "ADD h\\ttp://127.0.0.1:{port}/secret /secret",
        "ARG G=harmless\nFROM {base}\nADD ${{G:-http://127.0.0.1:{port}/secret}} /secret",
    ],
    ids=["shell-form", "exec-form", "through-an-arg", "tab", "quoted", "escaped", "arg-scope"],
)
def test_a_task_build_never_fetches_an_add_url_from_the_hosts_network(
    attacker, listener, engine, add
):
    _, client = attacker
    marker, dockerfile = marked(add.format(port=listener.port, base=BASE_IMAGE) + "\n")

    answer = client.create("ssrf", context_tar(dockerfile))

    message = refusal(answer)
    assert "ADD from a URL is not supported" in message and "RUN step" in message
    assert "host-only secret" not in message
    assert listener.connections == 0
    assert images_marked(engine, marker) == []


def test_another_organizations_task_image_is_never_a_base_or_a_copy_source(
    attacker, victim, engine, task_images
):
    _, victim_client = victim
    secret = secrets.token_hex(16)
    made = victim_client.create(
        "victim-task",
        context_tar(
            f"FROM {BASE_IMAGE}\nUSER root\nLABEL m={secrets.token_hex(8)}\n"
            "COPY secret.txt /app/state/secret.txt\n",
            {"secret.txt": secret},
        ),
    )
    assert made.status == 201, made.body
    victims_tag = made.json()["image"]
    task_images.add(victims_tag)
    victims_id = engine.api.inspect_image(victims_tag)["Id"]
    short_id = victims_id.removeprefix("sha256:")[:12]
    _, client = attacker

    for line, named in [
        (f"FROM {victims_tag}", victims_tag),
        (f"FROM {short_id}", short_id),
        (f"FROM {victims_id}", victims_id),
        (f"FROM {BASE_IMAGE}@sha256:{'0' * 64}", f"{BASE_IMAGE}@sha256:{'0' * 64}"),
        (f"FROM {BASE_IMAGE}\nCOPY --from={victims_tag} /app/state /stolen", victims_tag),
        (f"FROM {BASE_IMAGE}\nCOPY --from={short_id} /app/state /stolen", short_id),
        ("FROM belvedir-task-stage:0-0\nRUN true", "belvedir-task-stage:0-0"),
        (f"FROM\t{victims_tag}", victims_tag),
        (f"FROM {BASE_IMAGE}\nCOPY\t--from={victims_tag} /app/state /stolen", victims_tag),
        (f"FROM {BASE_IMAGE}\nCOPY --fr\\om={victims_tag} /app/state /stolen", victims_tag),
        (f'FROM {BASE_IMAGE}\nCOPY --"from"={victims_tag} /app/state /stolen', victims_tag),
        (f"FROM {BASE_IMAGE}\nCOPY --chown=0\t--from={short_id} /app/state /s", short_id),
    ]:
        answer = client.create("thief", context_tar(line + "\n"))

        message = refusal(answer)
        assert named in message, message
        assert "BELVEDIR_TASK_BASE_IMAGES" in message or "is not supported" in message, message
        assert secret not in message


def bomb(size: int) -> bytes:
    """A gzip'd tar holding one file of `size` zero bytes, ~1 KB a MiB (concatenated gzip
    members, which gzip readers, the engine's included, read as one stream)."""
    header = tarfile.TarInfo("zeros.bin")
    header.size = size
    one_mib = gzip.compress(b"\0" * MiB, compresslevel=9)
    parts = [gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT))]
    parts += [one_mib] * (size // MiB)
    parts.append(gzip.compress(b"\0" * (2 * tarfile.BLOCKSIZE)))  # the end of the archive
    return b"".join(parts)


def context_with(dockerfile: str, files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in {"Dockerfile": dockerfile.encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_an_add_archive_that_unpacks_past_the_disk_limit_is_refused_and_leaves_no_image(
    attacker, sandbox_settings, engine
):
    sandbox_settings.BELVEDIR_TASK_SANDBOX_DISK = 1024 * MiB
    archive = bomb(3 * 1024 * MiB)
    assert len(archive) < 4 * MiB  # what the attacker sends: a few MB
    marker, dockerfile = marked("ADD zeros.tar.gz /unpacked/\nRUN true\n")
    _, client = attacker

    answer = client.create("bomb", context_with(dockerfile, {"zeros.tar.gz": archive}))

    message = refusal(answer)
    assert "step 3 (ADD zeros.tar.gz /unpacked/)" in message
    assert (
        "zeros.tar.gz is an archive, which the engine would unpack outside the sandbox" in message
    )
    assert images_marked(engine, marker) == []


def test_a_copied_layer_past_the_disk_limit_stops_the_build_and_leaves_no_image(
    attacker, sandbox_settings, engine
):
    sandbox_settings.BELVEDIR_TASK_SANDBOX_DISK = 32 * MiB
    marker, dockerfile = marked("COPY big.bin /big.bin\nRUN true\n")
    _, client = attacker

    answer = client.create("layer", context_with(dockerfile, {"big.bin": b"\0" * (48 * MiB)}))

    assert "the build wrote more than the 32 MiB a task may write" in refusal(answer)
    assert images_marked(engine, marker) == []


def test_one_organizations_task_images_share_no_layer_of_the_build_with_anothers(
    attacker, victim, engine, task_images
):
    context = context_tar(
        f"FROM {BASE_IMAGE}\nLABEL m={secrets.token_hex(8)}\nCOPY a.txt /a.txt\n"
        "USER root\nRUN echo built > /b.txt\nCOPY a.txt /c.txt\n",
        {"a.txt": "same for both"},
    )
    built = []
    for (run, client), name in [(victim, "victim"), (attacker, "attacker")]:
        answer = client.create(name, context)
        assert answer.status == 201, answer.body
        task_images.add(answer.json()["image"])
        built.append((run, answer.json()))

    (victim_run, victims), (attacker_run, attackers) = built
    assert victims["image"] != attackers["image"] and attackers["cached"] is False
    base = {item["Id"] for item in engine.api.history(BASE_IMAGE)}

    def own_layers(tag: str) -> set[str]:
        return {item["Id"] for item in engine.api.history(tag)} - base - {"<missing>"}

    assert own_layers(victims["image"]) and own_layers(attackers["image"])
    assert own_layers(victims["image"]).isdisjoint(own_layers(attackers["image"]))
    for run, sandbox in built:
        labels = engine.api.inspect_image(sandbox["image"])["Config"]["Labels"]
        assert labels["belvedir.organization"] == run.project.organization_id
