"""The apps' heartbeat checks (runs/hooks.py heartbeat_checks) run once at the claim, then
every beat: harbor's warm task sandboxes start while the run's sandbox starts, not a beat
later (bench/harbor_managed.py: Harbor asks for its first task sandbox ~2-3 s after the
claim, and a gVisor container takes 1-2.5 s to start)."""

import threading

import pytest

from runs import heartbeat as heartbeat_module
from runs import hooks
from runs.heartbeat import Heartbeat
from runs.logtail import LogTail


@pytest.fixture
def recorded(monkeypatch):
    """A check registered for the test: an event set at its first call, and its calls."""
    called, calls = threading.Event(), []

    def make():
        def check(run_id, backend):
            calls.append(run_id)
            called.set()
            return []

        return check

    monkeypatch.setattr(hooks, "heartbeat_checks", [make])
    return called, calls


def test_the_checks_run_at_the_claim_before_the_first_beat(recorded, monkeypatch):
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_SECONDS", 60.0)  # no beat in this test
    called, calls = recorded
    beat = Heartbeat("run_x", LogTail([]), backend=object())
    beat.start()
    try:
        assert called.wait(5), "the checks waited for the first beat"
    finally:
        beat.stop()
    assert calls == ["run_x"]


def test_without_a_backend_no_check_runs(recorded, monkeypatch):
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_SECONDS", 60.0)
    called, calls = recorded
    beat = Heartbeat("run_x", LogTail([]))
    beat.start()
    beat.stop()
    assert calls == []
