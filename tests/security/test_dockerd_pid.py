"""scripts/dockerd-pid.sh: which dockerd scripts/ensure-docker.sh reloads with SIGHUP. With
second engines running (scripts/second-engine.sh and the two-engine tests start them, each with
a --pidfile of its own), the main engine's dockerd is the one its pid file names, else the one
without a --pidfile; never the first in the process table. The dockerds here are copies of
/bin/sh named `dockerd`, each sleeping: no engine is touched."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_dockerd(tmp_path):
    """start(*args) -> a process whose name is `dockerd` and whose arguments are `args`."""
    binary = tmp_path / "dockerd"
    shutil.copy("/bin/sh", binary)
    started = []

    def start(*args: str) -> subprocess.Popen:
        # `sh -c SCRIPT NAME ARGS...`: the script's `; :` keeps sh from exec'ing sleep.
        process = subprocess.Popen([str(binary), "-c", "sleep 60; :", "dockerd", *args])
        started.append(process)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{process.pid}/comm").read_text().strip() != "dockerd":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def _pid(tmp_path, pidfile: Path | None) -> str:
    env = {"PATH": "/usr/bin:/bin", "DOCKER_PIDFILE": str(pidfile or tmp_path / "none.pid")}
    done = subprocess.run(
        ["bash", "scripts/dockerd-pid.sh"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_pid_file_names_the_main_engine_even_when_a_second_one_started_first(
    tmp_path, fake_dockerd
):
    second = fake_dockerd("--pidfile", "/run/belvedir-engine-b.pid", "-H", "unix:///run/b.sock")
    main = fake_dockerd()
    pidfile = tmp_path / "docker.pid"
    pidfile.write_text(f"{main.pid}\n")
    assert second.pid < main.pid
    assert _pid(tmp_path, pidfile) == str(main.pid)


def test_without_a_live_pid_file_a_dockerd_with_a_pidfile_of_its_own_is_never_chosen(
    tmp_path, fake_dockerd
):
    seconds = [
        fake_dockerd("--pidfile=/run/belvedir-engine-b.pid"),
        fake_dockerd("-p", "/run/belvedir-engine-c.pid"),
    ]
    pidfile = tmp_path / "docker.pid"
    pidfile.write_text("999999999\n")  # a daemon that was killed

    found = _pid(tmp_path, pidfile)

    assert found not in {str(p.pid) for p in seconds}
    assert found == "" or "--pidfile" not in Path(f"/proc/{found}/cmdline").read_text()
