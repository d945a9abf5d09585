"""Where an app above `runs` joins a run's life without `runs` importing it (the floors: runs
never imports harbor or scores). The app appends its functions in its AppConfig.ready()
(harbor/hooks.py, scores/hooks.py); runs calls each at its moment, in the order they were
added."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandboxes.base import SandboxBackend

# A run is being stored as succeeded (`runs.services.run_finish`): called with (run_id, score,
# results) before the update; each answers Run fields stored in the same update as its end
# (scores: the score's standard error, 95% interval, n_tasks, or why there is none).
run_succeeding: list[Callable[[str, float | None, Any], dict]] = []

# A run ended (finished, failed, cancelled or reaped; `runs.services.run_finish` and
# `run_cancel`): called with its id.
run_ended: list[Callable[[str], Any]] = []

# Each reaper pass (`runs.reaper.reap`), after the runs' own work.
reaper_passes: list[Callable[[], Any]] = []

# Made once per run by its worker's heartbeat (`runs.heartbeat.Heartbeat`); what each makes is
# called once the run's sandbox has started and then every beat with (run_id, backend) and
# answers the `belvedir:` notes for the run's log (a SandboxError: the engine did not answer,
# the next beat tries again).
heartbeat_checks: list[Callable[[], Callable[[str, SandboxBackend], list[str]]]] = []
