"""scripts/cluster-groups.sh: the django-q2 clusters an up.sh killed with SIGKILL left running
are stopped by the next start (and the make up test's teardown), and nothing else is: not the
clusters of an up.sh that still runs, not a process that took a listed id since. Stand-in
clusters here are `python -c … manage.py qcluster` processes that fork a worker, each in a
process group of its own as up.sh starts them (make up's end to end runs the real ones)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.make_up import group_alive as alive

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cluster-groups.sh"
CLUSTER = "import os, time; os.fork(); time.sleep(120)"


def start_clusters(var: Path, *, owner_waits: bool = False) -> tuple[list[int], subprocess.Popen]:
    """An "up.sh" that starts two stand-in clusters with setsid and records them; it exits
    at once (as if killed) unless `owner_waits`."""
    program = f"""
        source {SCRIPT}
        setsid python3 -c '{CLUSTER}' manage.py qcluster </dev/null >/dev/null 2>&1 & a=$!
        setsid python3 -c '{CLUSTER}' manage.py qcluster </dev/null >/dev/null 2>&1 & b=$!
        cluster_groups_record {var} $a $b
        echo $a $b
        {"sleep 120" if owner_waits else ""}
    """
    owner = subprocess.Popen(["bash", "-c", program], stdout=subprocess.PIPE, text=True)
    groups = [int(g) for g in owner.stdout.readline().split()]
    deadline = time.monotonic() + 10
    while not all(alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.05)
    return groups, owner


def stop(var: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), "stop", str(var)], capture_output=True, text=True, timeout=30
    )


@pytest.fixture
def cleanup():
    groups: list[int] = []
    yield groups
    for group in groups:
        if alive(group):
            os.killpg(group, signal.SIGKILL)


def test_clusters_left_by_a_killed_up_are_stopped_with_their_workers(tmp_path, cleanup):
    groups, owner = start_clusters(tmp_path)
    cleanup += groups
    owner.wait(timeout=10)  # up.sh is gone, its trap never ran
    assert all(alive(g) for g in groups)  # the leak
    done = stop(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "stopping the django-q2 clusters an earlier start left running" in done.stderr
    assert not any(alive(g) for g in groups)  # each group's forked worker too
    assert not (tmp_path / "cluster-groups").exists()
    assert stop(tmp_path).returncode == 0  # nothing listed: nothing to do


def test_the_clusters_of_an_up_that_still_runs_are_left_alone(tmp_path, cleanup):
    groups, owner = start_clusters(tmp_path, owner_waits=True)
    cleanup += groups
    try:
        done = stop(tmp_path)
        assert done.returncode == 0 and done.stderr == ""
        assert all(alive(g) for g in groups)
    finally:
        owner.kill()
        owner.wait()


def test_a_listed_id_another_process_took_since_is_not_signalled(tmp_path, cleanup):
    other = subprocess.Popen(["sleep", "120"], start_new_session=True)
    cleanup.append(other.pid)
    # Listed with another start time: the process named there is not the one running now (and
    # an owner no pid can be: above the kernel's limit, 2**22).
    (tmp_path / "cluster-groups").write_text(f"owner 4194399 1\ngroup {other.pid} 1\n")
    done = stop(tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert other.poll() is None and alive(other.pid)
    assert not (tmp_path / "cluster-groups").exists()
    other.kill()
    other.wait()
