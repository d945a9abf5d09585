"""The isolation status is cached per process; past the cache a status that was fine is answered
at once while a new check runs behind it, and a status with problems is checked again at once."""

import threading
import time

import pytest

from belvedir import isolation


@pytest.fixture
def checks(settings, tmp_path, monkeypatch):
    """isolation._check replaced by a slow one whose answers the test sets; the calls made."""
    settings.BELVEDIR_SANDBOX_DATA_DIR = str(tmp_path / "sandboxes")
    monkeypatch.setattr(isolation, "_cached", None)
    monkeypatch.setattr(isolation, "CACHE_SECONDS", 0.05)
    monkeypatch.setattr(isolation, "STALE_SECONDS", 30.0)
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 0)  # checks itself, like a worker
    state = {"problems": [], "calls": 0, "gate": threading.Event()}
    state["gate"].set()

    def slow_check():
        state["gate"].wait(10)
        state["calls"] += 1
        return isolation.IsolationStatus(problems=list(state["problems"]), checked_at=time.time())

    monkeypatch.setattr(isolation, "_check", slow_check)
    return state


def test_a_fine_status_past_the_cache_is_answered_at_once_and_checked_behind(checks):
    assert isolation.isolation_status().ok
    time.sleep(0.1)
    checks["gate"].clear()  # the next check hangs until the test lets it go
    checks["problems"] = ["the firewall rules are gone"]

    started = time.monotonic()
    assert isolation.isolation_status().ok  # the last status, without waiting for the check
    assert time.monotonic() - started < 1.0

    checks["gate"].set()
    deadline = time.monotonic() + 10
    while checks["calls"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert not isolation.isolation_status().ok  # the check behind it was taken up


def test_a_status_with_problems_is_checked_again_before_answering(checks):
    checks["problems"] = ["the firewall rules are gone"]
    assert not isolation.isolation_status().ok
    time.sleep(0.1)
    checks["problems"] = []

    assert isolation.isolation_status().ok
    assert checks["calls"] == 2


def test_a_status_older_than_the_stale_limit_is_checked_again_before_answering(checks, monkeypatch):
    assert isolation.isolation_status().ok
    monkeypatch.setattr(isolation, "STALE_SECONDS", 0.05)
    time.sleep(0.1)
    checks["problems"] = ["the engine does not answer"]

    assert not isolation.isolation_status().ok
    assert checks["calls"] == 2
