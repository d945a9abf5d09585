"""Task-sandbox tests: a managed Harbor run to call the API for, and a client that calls it
the way the driver does (the standard library only, through the sandbox gateway; the same
calls as the example client in docs/task-sandboxes.md).

Also a pytest plugin for the whole suite (tests/conftest.py): the `task_images` fixture."""

from __future__ import annotations

import io
import json
import secrets
import tarfile
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
from django.utils import timezone

from belvedir import crypto
from belvedir.models import ApiKey
from belvedir.sandbox_config import engine_name
from belvedir.services import api_key_create
from billing.models import Kind
from billing.services import ledger_operator_entry
from harnesses.services import FIELDS, harness_create
from runs.models import Run, Status
from sandboxes.base import LABEL_RUN_ID, LABEL_TASK_SANDBOX
from tests.runs.helpers import git

BASE_IMAGE = "belvedir-sandbox:latest"


def context_tar(dockerfile: str, files: dict[str, str] | None = None) -> bytes:
    """A task's environment/ directory as a tar.gz: the Dockerfile and any other files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in {"Dockerfile": dockerfile, **(files or {})}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def tar_of(files: dict[str, str]) -> bytes:
    """A plain tar of `files` (name: text), as the driver uploads."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def fresh_dockerfile() -> str:
    """A task Dockerfile no earlier test built (a marker of its own), offline from the
    sandbox image, as the Harbor export writes them."""
    return (
        f"FROM {BASE_IMAGE}\nUSER root\nRUN mkdir -p /app /logs/verifier\n"
        f"LABEL belvedir.test-marker={secrets.token_hex(8)}\nWORKDIR /app\n"
    )


# A harness standing in for Harbor: it creates TASKS task sandboxes through the API and runs a
# command in each; with FINISH it stops them and writes results.json, else it ticks forever.
LOOP_HARNESS = r"""
import io, json, os, tarfile, time, urllib.error, urllib.request, uuid

BASE = os.environ["BELVEDIR_BASE_URL"].rstrip("/") + "/api/v1"
AUTH = {"Authorization": "Bearer " + os.environ["BELVEDIR_API_KEY"]}


def call(method, path, body=None, headers=None):
    request = urllib.request.Request(BASE + path, body, {**AUTH, **(headers or {})}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


buffer = io.BytesIO()
with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
    tar.add("environment", arcname=".")
boundary = uuid.uuid4().hex
body = (
    f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\ntask\r\n'
    f'--{boundary}\r\nContent-Disposition: form-data; name="context"; filename="c.tar.gz"\r\n'
    "Content-Type: application/gzip\r\n\r\n"
).encode() + buffer.getvalue() + f"\r\n--{boundary}--\r\n".encode()
made = []
for i in range(int(os.environ["TASKS"])):
    status, out = call("POST", "/task-sandboxes", body,
                       {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    print("create", status, out.decode()[:300], flush=True)
    sandbox = json.loads(out)["id"]
    made.append(sandbox)
    command = json.dumps({"command": "echo hello from task $0 in $(pwd)"}).encode()
    status, out = call("POST", f"/task-sandboxes/{sandbox}/exec", command,
                       {"Content-Type": "application/json"})
    print("exec", status, out.decode(), flush=True)
if os.environ.get("FINISH"):
    for sandbox in made:
        print("stop", call("DELETE", f"/task-sandboxes/{sandbox}")[0], flush=True)
    json.dump({"score": 1.0, "task_sandboxes": made}, open("results.json", "w"))
else:
    while True:
        print("tick", flush=True)
        time.sleep(1)
"""


def loop_repo_at(repo: Path) -> str:
    """A git repo of the loop harness (run.py) and a task environment of its own (a fresh
    Dockerfile, environment/); its file:// URL."""
    (repo / "environment").mkdir(parents=True)
    (repo / "run.py").write_text(LOOP_HARNESS)
    (repo / "environment" / "Dockerfile").write_text(fresh_dockerfile())
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "loop"]):
        git(repo, *args)
    return f"file://{repo}"


def make_managed_run(
    owner,
    *,
    env: dict[str, str] | None = None,
    credits_usd: float = 5.0,
    engine: str | None = None,
):
    """A running run of a managed Harbor harness (the Runner-on-Harbor card as shipped) with
    its own run key, as the worker leaves it once its sandbox started; (run, run key). Its
    engine is this process's, unless `engine` names another worker host's.

    The organization gets `credits_usd` first: a managed harness is saved only for an
    organization that holds credits (or has pay as you go on). With `credits_usd=0` the
    harness is saved while $1 of credits existed, spent again before the run."""
    grant = int((credits_usd or 1.0) * 1_000_000)
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=grant, note="tests"
    )
    card_env = {"HARBOR_AGENT": "oracle", "HARBOR_N_TASKS": "5", **(env or {})}
    harness = harness_create(
        project=owner.project,
        created_by=owner.user,
        preset="harbor-runner",
        name=f"harbor {secrets.token_hex(3)}",
        env=card_env,
    )
    if not credits_usd:
        ledger_operator_entry(
            organization=owner.org, kind=Kind.ADJUSTMENT, amount_micros=-grant, note="spent"
        )
    now = timezone.now()
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        harness_snapshot={f: getattr(harness, f) for f in FIELDS},
        harness_env_secrets_encrypted=harness.env_secrets_encrypted,
        status=Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        container_id="c-of-the-run",
        engine=engine_name() if engine is None else engine,
    )
    run.ingest_key, key = api_key_create(
        project=owner.project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.run_key_encrypted = crypto.encrypt(key)
    run.save(update_fields=["ingest_key", "run_key_encrypted"])
    return run, key


def managed_client(owner, base_url: str, **options) -> tuple[Run, Client]:
    """A managed run (`make_managed_run(owner, **options)`) and a client with its run key."""
    run, key = make_managed_run(owner, **options)
    return run, Client(base_url, key)


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict

    def json(self):
        return json.loads(self.body)


class Client:
    """The driver's side of docs/task-sandboxes.md."""

    def __init__(self, base_url: str, key: str):
        self.base = base_url.rstrip("/") + "/api/v1"
        self.key = key

    def call(self, method, path, body=None, headers=None, timeout=600) -> Answer:
        request = urllib.request.Request(
            self.base + path,
            data=body,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return Answer(answer.status, answer.read(), dict(answer.headers))
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.read(), dict(error.headers))

    def create_forced(self, name: str, context: bytes) -> Answer:
        """Harbor's start(force_build=True)."""
        return self.create(name, context, force_build=True)

    def create(self, name: str, context: bytes, force_build: bool = False) -> Answer:
        boundary = uuid.uuid4().hex
        forced = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="force_build"\r\n\r\ntrue\r\n'
            if force_build
            else ""
        )
        body = (
            forced
            + f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="context"; '
            'filename="context.tar.gz"\r\nContent-Type: application/gzip\r\n\r\n'
        ).encode()
        body += context + f"\r\n--{boundary}--\r\n".encode()
        content_type = f"multipart/form-data; boundary={boundary}"
        return self.call("POST", "/task-sandboxes", body, {"Content-Type": content_type})

    def exec_lines(self, sandbox_id: str, command: str, **fields) -> list[dict]:
        body = json.dumps({"command": command, **fields}).encode()
        answer = self.call(
            "POST",
            f"/task-sandboxes/{sandbox_id}/exec",
            body,
            {"Content-Type": "application/json"},
        )
        assert answer.status == 200, answer.body
        return [json.loads(line) for line in answer.body.splitlines()]

    def put_files(self, sandbox_id: str, path: str, tar_bytes: bytes) -> Answer:
        return self.call(
            "PUT",
            f"/task-sandboxes/{sandbox_id}/files?path={path}",
            tar_bytes,
            {"Content-Type": "application/x-tar"},
        )

    def get_files(self, sandbox_id: str, path: str) -> Answer:
        return self.call("GET", f"/task-sandboxes/{sandbox_id}/files?path={path}")

    def stop(self, sandbox_id: str) -> Answer:
        return self.call("DELETE", f"/task-sandboxes/{sandbox_id}")


def with_files(client, task_images, steps: str, command: str) -> dict:
    """A task sandbox of a fresh image with `steps`, where `command` made its files."""
    sandbox = client.create("du", context_tar(fresh_dockerfile() + steps)).json()
    task_images.add(sandbox["image"])
    assert client.exec_lines(sandbox["id"], command)[-1]["exit_code"] == 0
    return sandbox


def task_containers(run_id: str) -> list:
    """The engine's task containers of a run (any state)."""
    client = docker.from_env()
    try:
        return client.containers.list(
            all=True,
            filters={"label": [f"{LABEL_RUN_ID}={run_id}", LABEL_TASK_SANDBOX]},
            ignore_removed=True,
        )
    finally:
        client.close()


def remove_task_images(tags: set[str]) -> None:
    """Remove the task images a test built (never another's)."""
    client = docker.from_env()
    try:
        for tag in tags:
            try:
                client.images.remove(tag, force=True)
            except docker.errors.DockerException:
                pass
    finally:
        client.close()


@pytest.fixture
def task_images():
    """The tags of the task images the test builds (it adds them), removed when it ends."""
    tags: set[str] = set()
    yield tags
    remove_task_images(tags)


def count_served(monkeypatch, seen: list[list[str]]) -> None:
    """Add to `seen` the argv of every command the sandboxes' exec servers run from here on
    (not those they decline: the engine then runs them, and is counted apart)."""
    from sandboxes import taskd

    run, open_transfer = taskd.run, taskd.open_transfer

    def counted_run(client, container_id, argv, **kwargs):
        events = run(client, container_id, argv, **kwargs)
        if events is None:
            return None

        def counted():
            first = next(events, None)
            if first is not None and "fallback" not in first:
                seen.append(list(argv))
            if first is not None:
                yield first
            yield from events

        return counted()

    def counted_transfer(client, container_id, argv, **kwargs):
        served = open_transfer(client, container_id, argv, **kwargs)
        if served is not None:
            seen.append(list(argv))
        return served

    monkeypatch.setattr(taskd, "run", counted_run)
    monkeypatch.setattr(taskd, "open_transfer", counted_transfer)
