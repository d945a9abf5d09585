"""The router tests' helpers: the covered model's prices, a run with its key, uvicorn."""

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from django.db import connection

from belvedir import crypto
from belvedir.models import ApiKey
from belvedir.services import api_key_create
from runs.models import Run

ROOT = Path(__file__).resolve().parents[2]
MODEL = "fakelab/fake-model"
# $1 and $2 a million tokens: an input token costs 1 micro-dollar, an output token 2.
INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT = 1_000_000, 2_000_000, 100


def make_run(
    project,
    harness,
    *,
    cap_micros: int,
    covered: bool = True,
    status: str = "running",
    model: str = MODEL,
    **fields,
):
    """A run of `model` with its own key (the plaintext comes back as `run.plain_key`); when
    covered, its model is (a judge only when `fields` say so)."""
    run = Run.objects.create(
        project=project,
        harness=harness,
        harness_name=harness.name,
        status=status,
        model=model,
        covered=covered,
        covered_cap_micros=cap_micros,
        **{"model_covered": covered, **fields},
    )
    run.ingest_key, key = api_key_create(
        project=project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.run_key_encrypted = crypto.encrypt(key)
    run.save(update_fields=["ingest_key", "run_key_encrypted"])
    run.plain_key = key
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_uvicorn(
    *,
    upstream_base: str,
    database_name: str,
    port: int,
    log_path: Path,
    command: list[str] | None = None,
    **extra_env: str,
):
    """`uvicorn belvedir.asgi:application` on 127.0.0.1:port (one process), ready to serve; or
    `command` (which reads the port from $PORT)."""
    settings_dict = connection.settings_dict
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": (
            f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
            f"/{database_name}"
        ),
        "BELVEDIR_ROUTER_UPSTREAM_BASE": upstream_base,
        "BELVEDIR_ROUTER_UPSTREAM_KEY": "sk-upstream-operator",
        "PORT": str(port),
        **extra_env,
    }
    log = open(log_path, "wb")  # noqa: SIM115 (closed with the process)
    process = subprocess.Popen(
        command
        or [sys.executable, "-m", "uvicorn", "belvedir.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited: {log_path.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError("uvicorn did not start in 60 s")


@contextlib.contextmanager
def serving_app(log_dir: Path, port: int | None = None, **extra_env: str) -> Iterator[str]:
    """The app under uvicorn on `port` (a free one by default), on this test's database, with
    no model upstream (a closed port): its URL while the block runs, stopped afterwards."""
    port = port or free_port()
    process = start_uvicorn(
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=log_dir / "uvicorn.log",
        **extra_env,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def settled(run: Run, *, spans: int, within: float = 15.0) -> Run:
    """The run once the router settled and recorded its calls: nothing reserved, `spans` spans.

    A non-streamed call is settled after its answer goes out, with the others of its batch
    (router/settlement.py), so a test reads the run once that has happened (waiting at most
    `within` seconds)."""
    from traces.models import Span

    deadline = time.monotonic() + within
    while True:
        run.refresh_from_db()
        recorded = Span.objects.filter(run=run).count()
        if run.covered_reserved_micros == 0 and recorded >= spans:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not settled: {run.covered_reserved_micros} reserved, {recorded}/{spans} spans"
            )
        time.sleep(0.05)
