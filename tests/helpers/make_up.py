"""`make up`'s platform for a test: scripts/up.sh started as `make up` starts it (uvicorn, the
sandbox gateway, both django-q2 clusters), with a database, a var/ directory (its logs and
keys, BELVEDIR_VAR_DIR) and ports of the test's own, and no setting of the test session's
(pytest's, scripts/test.sh's, tests/conftest.py's warm pool off). What its instance leaves on
the host once stopped (its warm sandboxes, its spare volumes, its install snapshots: a `make up`
keeps them for its next start) is removed by `release`, so the tests after it find the host as
it was."""

import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import pytest

from sandboxes import diskquota, installcache, instances, volumes
from sandboxes.base import LABEL_INSTANCE

ROOT = Path(__file__).resolve().parents[2]
# What the test session's environment may set that `make up` would not: the platform's own
# settings, Django's and django-q2's. up.sh sets or derives each it needs.
SESSION_ONLY = ("BELVEDIR_", "DJANGO_", "Q_")
SESSION_ONLY_NAMES = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "PORT", "HOST"}
LOGS = ("gateway.log", "qcluster-runs.log", "qcluster-housekeeping.log")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_gateway_port() -> int:
    """A free port of the sandbox port range on the sandbox network's gateway IP."""
    ports = list(range(18700, 18800))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("172.30.0.1", port))
            except OSError:
                continue
            return port
    pytest.fail("no free port in 18700-18799 on 172.30.0.1")


def stop_left_clusters(var: Path) -> None:
    """Stop the clusters a killed up.sh of this var/ left running (none while it runs)."""
    done = subprocess.run(
        ["bash", "scripts/cluster-groups.sh", "stop", str(var)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Platform:
    """One instance of `make up`: its environment, var/ directory and URL."""

    env: dict = field(repr=False)
    var: Path
    base: str
    process: subprocess.Popen | None = field(default=None, repr=False)
    log: Path | None = None

    @classmethod
    def made(cls, database_url: str, var: Path) -> "Platform":
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(SESSION_ONLY) and k not in SESSION_ONLY_NAMES
        }
        port = free_port()
        env |= {
            "PORT": str(port),
            "GATEWAY_PORT": str(free_gateway_port()),
            "DATABASE_URL": database_url,
            "BELVEDIR_VAR_DIR": str(var),
        }
        return cls(env=env, var=var, base=f"http://127.0.0.1:{port}")

    def _spawn(self, log: Path) -> None:
        """scripts/up.sh as `make up` runs it, in a process group of its own, output to `log`."""
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                ["bash", "scripts/up.sh"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start(self, log: Path) -> None:
        """scripts/up.sh started as `make up` does, once its web server listens."""
        self._spawn(log)
        deadline = time.monotonic() + 180
        while b"Uvicorn running on" not in log.read_bytes():  # scripts/serve.sh
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"scripts/up.sh did not start:\n{self.logs()}")
            time.sleep(0.3)

    def start_failing(self, log: Path, timeout: float = 180) -> int:
        """scripts/up.sh run to its exit (a start that must fail); its exit code. One still
        running after `timeout` s is stopped and fails the test."""
        self._spawn(log)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"scripts/up.sh went on for {timeout:.0f} s:\n{self.logs()}")

    def stop(self) -> None:
        """As Ctrl-C stops `make up`: SIGTERM to its process group (up.sh's trap stops the
        gateway and the clusters); then whatever clusters an up.sh that was killed left."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        stop_left_clusters(self.var)

    def kill(self) -> None:
        """SIGKILL to up.sh's process group: no trap runs, and its clusters (each in a group of
        its own) go on; the next start stops them (scripts/cluster-groups.sh)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def cluster_groups(self) -> list[int]:
        """The clusters' process groups as up.sh listed them in var/cluster-groups."""
        path = self.var / "cluster-groups"
        lines = path.read_text().splitlines() if path.exists() else []
        return [int(line.split()[1]) for line in lines if line.startswith("group ")]

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""

    def logs(self, tail: int = 6000) -> str:
        """The end of every log of the instance: up.sh's output (uvicorn's access log too),
        the gateway's and both clusters'; for a failure message. A line repeated (a test's
        polling in the access log) is shown once, with its count."""
        parts = []
        for path in (self.log, *(self.var / name for name in LOGS)):
            text = path.read_text(errors="replace") if path and path.exists() else "(none)"
            lines = [
                line if (n := len(list(group))) == 1 else f"{line}  (x{n})"
                for line, group in itertools.groupby(text.splitlines())
            ]
            parts.append(f"== {path}\n" + "\n".join(lines)[-tail:])
        return "\n".join(parts)

    def instance(self) -> tuple[str, Path]:
        """The platform instance its sandboxes are labelled with, and its sandbox data dir."""
        program = (
            "from django.conf import settings; from belvedir.sandbox_config import instance_id; "
            "print(instance_id(), settings.BELVEDIR_SANDBOX_DATA_DIR)"
        )
        done = subprocess.run(
            [".venv/bin/python", "manage.py", "shell", "-c", program],
            cwd=ROOT,
            env={**self.env, "BELVEDIR_DEV": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        instance, data_dir = done.stdout.strip().splitlines()[-1].split()
        return instance, Path(data_dir)

    def release(self, instance: str, data_dir: Path) -> None:
        """Remove the stopped instance's sandboxes (their anonymous Docker volumes too) and
        release their quota volumes and its spares; remove its install snapshots and its
        heartbeat on the host."""
        client = docker.from_env()
        try:
            for item in client.api.containers(
                all=True, filters={"label": f"{LABEL_INSTANCE}={instance}"}
            ):
                client.api.remove_container(item["Id"], force=True, v=True)
                if name := (item.get("Labels") or {}).get(volumes.LABEL_VOLUME):
                    volumes.release(data_dir, name)
        finally:
            client.close()
        for name in diskquota.volume_names(root=data_dir):
            if diskquota.spare_owner(root=data_dir, name=name) == instance:
                if diskquota.claim_spare(root=data_dir, name=name):
                    volumes.release(data_dir, name)
        left = [
            name
            for name in diskquota.volume_names(root=data_dir)
            if diskquota.spare_owner(root=data_dir, name=name) == instance
        ]
        # Its install snapshots: its database goes with the test, so nothing finds them again
        # (a `make up` keeps them for its next start; the host's budget evicts them at last).
        shutil.rmtree(installcache.cache_dir(data_dir, instance), ignore_errors=True)
        instances.heartbeat_file(data_dir, instance).unlink(missing_ok=True)
        assert left == [], f"spare volumes of the stopped instance {instance} left: {left}"
