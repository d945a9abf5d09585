"""Helpers for run tests: git repos of the example harnesses, polling, the engine's containers,
execute_run in a thread."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker
import pytest
from django.db import connection
from django_q.models import OrmQ

from belvedir.sandbox_config import engine_name, warm_template
from runs.executor import execute_run
from runs.models import Run
from sandboxes import warm
from sandboxes.base import LABEL_RUN_ID
from sandboxes.docker import DockerBackend

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROOT = Path(__file__).resolve().parents[2]


def git(dest: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=dest,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def git_repo_of(source: Path, dest: Path) -> str:
    """Commit a copy of `source` into a new git repository; its file:// URL."""
    shutil.copytree(source, dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "harness")
    return f"file://{dest}"


def wait_for(
    predicate: Callable[[], object],
    timeout: float,
    what: str,
    every: float = 0.1,
    on_timeout: Callable[[], object] | None = None,
):
    """Poll until `predicate()` is truthy; its value. Fails the test after `timeout` s,
    with what `on_timeout()` returns (e.g. a subprocess's stderr) in the message."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{on_timeout()}" if on_timeout else ""
            pytest.fail(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(every)


def queue_entries(run_id: str) -> list[OrmQ]:
    """The run's tasks in django-q2's queue (its ORM broker); `lock` past now: a cluster took it."""
    return [q for q in OrmQ.objects.all() if tuple(q.task.get("args", ())) == (run_id,)]


def containers_of(run_id: str) -> list:
    """Every container (any state) labelled with this run id, straight from the engine."""
    client = docker.from_env()
    try:
        # ignore_removed: a container removed between the listing and its inspection (a
        # cancel or a finish racing this call) is gone, not an error.
        return client.containers.list(
            all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"}, ignore_removed=True
        )
    finally:
        client.close()


def subprocess_database_url() -> str:
    """A DATABASE_URL for the database this test runs against (for subprocesses)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Background:
    """execute_run in a thread, as a worker would; closes its DB connection at the end."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.result: str | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._go, daemon=True, name=f"exec {run_id}")
        self.thread.start()

    def _go(self) -> None:
        try:
            self.result = execute_run(self.run_id)
        except BaseException as exc:  # surfaced by join()
            self.error = exc
        finally:
            connection.close()

    def join(self, timeout: float = 60) -> str | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"execute_run({self.run_id}) still running"
        if self.error:
            raise self.error
        return self.result


def start_qcluster(name: str, log: Path, **env: str) -> subprocess.Popen:
    """`Q_CLUSTER_NAME=name manage.py qcluster` on this test's database, in its own process
    group (as scripts/up.sh starts it); stop it with stop_qcluster."""
    environment = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "Q_CLUSTER_NAME": name,
        **env,
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_for(
        lambda: process.poll() is not None or b"running." in log.read_bytes(),
        60,
        f"the {name} cluster to start",
        on_timeout=log.read_text,
    )
    assert process.poll() is None, log.read_text()
    return process


def process_group_members(pgid: int) -> list[int]:
    """Live processes (zombies, already dead, left out) in process group `pgid`, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it exited while we looked
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ")".
        state, _ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def process_group_alive(pgid: int) -> bool:
    return bool(process_group_members(pgid))


def stop_qcluster(process: subprocess.Popen, grace: float = 20) -> None:
    """Stop a cluster the documented way: SIGTERM to its whole process group, then SIGKILL to
    what is left once its workers are gone (django-q2's main process waits forever for a
    sentinel that died) or after `grace` seconds; reaps the main process."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while set(process_group_members(process.pid)) - {process.pid}:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_running_and_ticking(run_id: str) -> None:
    """Until the run is running and its harness (`SLEEP`, ticking each second) has printed."""
    wait_for(
        lambda: (r := Run.objects.get(pk=run_id)).status == "running" and "tick" in r.log_tail,
        30,
        "the run to be running and ticking",
    )


def filling_done() -> None:
    """Wait for the fills started after a run's end (WarmPool.fill_later) to be done."""
    for thread in threading.enumerate():
        if thread.name == "warm-fill":
            thread.join(timeout=30)


def filled(backend) -> warm.Member:
    """The pool's one unclaimed member, waiting (started by `fill` if need be)."""
    filling_done()
    backend.pool.fill()
    [member] = [
        m
        for m in backend.pool.members()
        if m.key == backend.pool.key and backend.pool.claimed_by(m.id) is None
    ]
    return member


def second_platform(data_dir: Path) -> DockerBackend:
    """Another platform instance on this host's engine and sandbox data dir (a second `make up`
    on a fresh database), with a warm pool of one of the default shape."""
    return DockerBackend(
        instance=f"other-{uuid.uuid4().hex[:8]}",
        data_dir=data_dir,
        warm_size=1,
        warm_template=warm_template(),
        warm_engine=engine_name(),
    )


def exists(container_id: str) -> bool:
    client = docker.from_env()
    try:
        client.api.inspect_container(container_id)
        return True
    except docker.errors.NotFound:
        return False
    finally:
        client.close()
