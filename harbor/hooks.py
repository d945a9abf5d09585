"""What harbor adds to a run's life (runs/hooks.py; harbor/apps.py registers it once, from
its AppConfig.ready): a run's end stops its task sandboxes and settles them, each reaper pass
does harbor's own pass, and a run's heartbeat checks its task sandboxes' disk. The run page
shows them by pulling harbor's partial in (harbor/views.py), not through a hook."""

from __future__ import annotations

from harbor import disk, reaper, services, warm
from runs import hooks


def run_ended(run_id: str) -> None:
    """The run ended: its task sandboxes' rows stopped and settled anywhere, their containers
    removed on its engine (harbor's reaper pass does what this could not)."""
    services.task_sandboxes_stop_for_run(run_id=run_id)


def register() -> None:
    for registry, function in (
        (hooks.run_ended, run_ended),
        (hooks.reaper_passes, reaper.task_sandboxes_reap),
        (hooks.heartbeat_checks, disk.HeartbeatCheck),
        (hooks.heartbeat_checks, warm.HeartbeatWarm),
    ):
        if function not in registry:
            registry.append(function)
