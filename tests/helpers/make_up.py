"""`make up`'s platform for a test: scripts/up.sh started as `make up` starts it (uvicorn, the
sandbox gateway, both django-q2 clusters), with a database, a var/ directory (its logs and
keys, BELVEDIR_VAR_DIR) and ports of the test's own, and no setting of the test session's
(pytest's, scripts/test.sh's) but the warm pool off: the suite's rule (tests/conftest.py) that
a test sees only the containers it made, and no warm sandbox outlives the test's instance."""

import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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
            "BELVEDIR_SANDBOX_WARM": "0",
        }
        return cls(env=env, var=var, base=f"http://127.0.0.1:{port}")

    def start(self, log: Path) -> None:
        """scripts/up.sh started as `make up` does, once its web server listens."""
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
        deadline = time.monotonic() + 180
        while b"Uvicorn running on" not in log.read_bytes():  # scripts/serve.sh
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"scripts/up.sh did not start:\n{self.logs()}")
            time.sleep(0.3)

    def stop(self) -> None:
        """As Ctrl-C stops `make up`: SIGTERM to its process group (up.sh's trap stops the
        gateway and the clusters)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""

    def logs(self, tail: int = 6000) -> str:
        """The end of every log of the instance: up.sh's output (uvicorn's access log too),
        the gateway's and both clusters'; for a failure message."""
        parts = [f"== {self.log}\n{self.output()[-tail:]}"]
        for name in LOGS:
            path = self.var / name
            text = path.read_text(errors="replace")[-tail:] if path.exists() else "(none)"
            parts.append(f"== {path}\n{text}")
        return "\n".join(parts)
