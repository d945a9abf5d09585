"""harbor joins a run's life through runs/hooks.py, registered once from its AppConfig.ready:
runs itself never imports harbor (the floors contract), so these registrations are the only
way a run's end, the reaper and the heartbeat reach it (the run page pulls harbor's partial in
with hx-get: tests/harbor/test_task_sandbox_pages.py)."""

from harbor import disk, hooks, reaper, warm
from runs import hooks as run_hooks


def test_harbors_functions_are_registered_once_even_if_registered_again():
    hooks.register()

    assert run_hooks.run_ended.count(hooks.run_ended) == 1
    assert run_hooks.reaper_passes.count(reaper.task_sandboxes_reap) == 1
    assert run_hooks.heartbeat_checks.count(disk.HeartbeatCheck) == 1
    assert run_hooks.heartbeat_checks.count(warm.HeartbeatWarm) == 1
    assert not hasattr(run_hooks, "run_page")


def test_a_heartbeat_check_waits_its_interval_before_asking_the_engine(monkeypatch):
    asked = []
    monkeypatch.setattr(disk, "check_run", lambda **kw: asked.append(kw) or ["note"])
    monkeypatch.setattr(disk, "CHECK_SECONDS", 3600.0)
    check = disk.HeartbeatCheck()

    assert check("run_1", backend=None) == [] and asked == []

    monkeypatch.setattr(disk, "CHECK_SECONDS", 0.0)
    assert check("run_1", None) == ["note"]
    assert asked == [{"run_id": "run_1", "backend": None}]
