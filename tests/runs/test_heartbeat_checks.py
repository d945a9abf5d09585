"""The apps' heartbeat checks (runs/hooks.py heartbeat_checks) run once the run's sandbox has
started, at once, then every beat: harbor's warm task sandboxes start while Harbor imports in
it, not a beat later (Harbor asks for its first task sandbox ~2-3 s after the claim, and a
gVisor container takes 1-2.5 s to start), and not before it, when they would take the CPU
from the run sandbox's own start (bench/harbor_managed.py: 1.6 s against 0.6 s)."""

import threading
import time

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


def test_the_checks_run_once_the_sandbox_started_before_the_next_beat(recorded, monkeypatch):
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_SECONDS", 60.0)  # no beat in this test
    called, calls = recorded
    beat = Heartbeat("run_x", LogTail([]), backend=object())
    beat.start()
    try:
        assert not called.wait(0.5), "the checks ran before the run's sandbox started"
        beat.sandbox_started()
        assert called.wait(5), "the checks waited for the next beat"
    finally:
        beat.stop()
    assert calls == ["run_x"]


def test_no_check_runs_at_the_beats_before_the_sandbox_started(recorded, monkeypatch):
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_SECONDS", 0.05)
    beats = []
    monkeypatch.setattr(heartbeat_module, "run_heartbeat", lambda **kw: beats.append(kw))
    called, calls = recorded
    beat = Heartbeat("run_x", LogTail([]), backend=object())
    beat.start()
    try:
        assert not called.wait(0.5)
        assert len(beats) >= 3, beats  # it beat meanwhile
        beat.sandbox_started()
        assert called.wait(5)
        time.sleep(0.3)
    finally:
        beat.stop()
    assert len(calls) >= 3, calls  # then at every beat


def test_a_stop_ends_the_beats_at_once(recorded, monkeypatch):
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_SECONDS", 60.0)
    beat = Heartbeat("run_x", LogTail([]), backend=object())
    beat.start()
    started = time.monotonic()
    beat.stop()
    assert time.monotonic() - started < 2
    assert not beat._thread.is_alive()


def test_without_a_backend_no_check_runs(recorded, monkeypatch):
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_SECONDS", 60.0)
    called, calls = recorded
    beat = Heartbeat("run_x", LogTail([]))
    beat.start()
    beat.sandbox_started()
    time.sleep(0.3)
    beat.stop()
    assert calls == []
