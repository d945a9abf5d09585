"""The disk limit of task sandboxes (docs/task-sandboxes.md, "What a task sandbox is").

Harbor task images write anywhere in their root filesystem, so a task sandbox has no
read-only root and no quota volume; the engine's storage (overlay2 on ext4) cannot cap a
container's writable layer either (`--storage-opt size` needs xfs with project quotas). So
the run's worker watches instead: every CHECK_SECONDS its heartbeat (runs.heartbeat.Heartbeat,
through runs/hooks.py) measures the writable layer of each of the run's running task
sandboxes, and one past BELVEDIR_TASK_SANDBOX_DISK (0: the run sandboxes'
BELVEDIR_SANDBOX_DISK) is removed, its row failed with the reason, and a `belvedir:` line goes
into the run's log. A task that writes fast passes the limit by what it writes between two
checks before it is stopped.
"""

from __future__ import annotations

import time

from harbor.containers import limit_bytes
from harbor.models import TaskSandbox
from harbor.services import task_sandbox_stop
from sandboxes.base import SandboxBackend, SandboxHandle

CHECK_SECONDS = 5.0
OVER_LIMIT = (
    "task sandbox {name!r} ({id}) wrote {used} to its filesystem, over the {limit} a task "
    "sandbox may write (BELVEDIR_TASK_SANDBOX_DISK), so it was stopped"
)


def check_run(*, run_id: str, backend: SandboxBackend) -> list[str]:
    """Stop the run's task sandboxes on `backend`'s engine that wrote more than the limit;
    the `belvedir:` note of each (none when the run has no running task sandbox: one query,
    no engine call)."""
    rows = {
        row.container_id: row
        for row in TaskSandbox.objects.filter(
            run_id=run_id, status=TaskSandbox.Status.RUNNING
        ).exclude(container_id="")
    }
    if not rows:
        return []
    limit = limit_bytes()
    handles = [SandboxHandle(id=container_id, run_id=run_id) for container_id in rows]
    notes = []
    for container_id, used in backend.written_bytes(handles).items():
        row = rows.get(container_id)
        if row is None or used <= limit:
            continue
        error = OVER_LIMIT.format(name=row.name, id=row.pk, used=_size(used), limit=_size(limit))
        task_sandbox_stop(sandbox=row, error=f"{error}.")
        notes.append(f"belvedir: {error}.")
    return notes


class HeartbeatCheck:
    """One run's worker's check (runs/hooks.py heartbeat_checks): `check_run` at most every
    CHECK_SECONDS, the first CHECK_SECONDS after the run's heartbeat started."""

    def __init__(self) -> None:
        self._checked = time.monotonic()

    def __call__(self, run_id: str, backend: SandboxBackend) -> list[str]:
        if time.monotonic() - self._checked < CHECK_SECONDS:
            return []
        self._checked = time.monotonic()
        return check_run(run_id=run_id, backend=backend)


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"
