"""A running run's heartbeat, from its worker: the beat the reaper reads, the log tail it
carries, the GPU device's lease, and the checks of the apps above runs (runs/hooks.py)."""

from __future__ import annotations

import logging
import threading
import time

from django.db import close_old_connections, connection

from runs import gpu, hooks
from runs.logtail import LogTail
from runs.models import Stage
from runs.services import run_heartbeat, run_stage_advance
from sandboxes.base import SandboxBackend, SandboxError

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 1.0


class Heartbeat:
    """Beats (with the log tail when it changed) from the claim until the run is finished,
    so the reaper sees the worker alive through a long clone or copy too; renews the lease on
    the run's GPU device, if it holds one; with a `backend`, once the run's sandbox has started
    (`sandbox_started`), runs the checks of the apps above runs (runs/hooks.py: harbor starts
    the run's warm task sandboxes and stops those that wrote past their disk limit) at once and
    then every beat, noting what they say in the log."""

    def __init__(
        self,
        run_id: str,
        tail: LogTail,
        *,
        gpu_device: bool = False,
        backend: SandboxBackend | None = None,
    ):
        self.run_id = run_id
        self.tail = tail
        self.gpu_device = gpu_device
        self.backend = backend
        self._checks = [make() for make in hooks.heartbeat_checks]
        self._stop = threading.Event()
        self._started = threading.Event()  # the run's sandbox has started (`sandbox_started`)
        self._wake = threading.Event()  # set by `stop` and `sandbox_started`
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"beat {run_id}")

    def start(self) -> None:
        self._thread.start()

    def sandbox_started(self) -> None:
        """The run's sandbox is up: the checks run now, then at every beat. Not before: a
        run has no task sandbox until its sandbox runs, and the warm task sandboxes the first
        check starts would take the CPU from that start (bench/harbor_managed.py, 2 Dec:
        started at the claim, the run sandbox's start went from 0.6 to 1.6 s and Harbor's
        import from 2.1-2.6 to 3.1-3.3 s on an idle 2-core host)."""
        self._started.set()
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        stage_told = checked = False
        next_beat = time.monotonic() + HEARTBEAT_SECONDS
        try:
            while True:
                self._wake.wait(max(0.0, next_beat - time.monotonic()))
                self._wake.clear()  # `_stop` and `_started` are read after: no wake is lost
                if self._stop.is_set():
                    return
                if self._started.is_set() and not checked:
                    self._first_check()
                    checked = True
                if time.monotonic() < next_beat:
                    continue
                next_beat = time.monotonic() + HEARTBEAT_SECONDS
                try:
                    close_old_connections()
                    if self.tail.run_started and not stage_told:
                        run_stage_advance(run_id=self.run_id, stage=Stage.RUNNING)
                        stage_told = True
                    dirty, self.tail.dirty = self.tail.dirty, False
                    if dirty:
                        run_heartbeat(
                            run_id=self.run_id, log_tail=self.tail.text(), log_size=self.tail.size
                        )
                    else:
                        run_heartbeat(run_id=self.run_id)
                    if self.gpu_device:
                        gpu.device_renew(run_id=self.run_id)
                    if self._started.is_set():
                        self._check()  # its notes go out with the next beat
                except Exception:  # one failed beat (a dropped connection) must not end them all
                    log.warning("heartbeat of %s failed; trying again", self.run_id, exc_info=True)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection; it would leak otherwise

    def _first_check(self) -> None:
        """The checks once the run's sandbox is up, not waiting for the next beat: harbor's
        warm task sandboxes start while Harbor imports in it (Harbor asks for its first task
        sandbox ~2-3 s after the claim, a gVisor container takes 1-2.5 s to start)."""
        try:
            self._check()
        except Exception:
            log.warning("the first checks of %s failed", self.run_id, exc_info=True)
            connection.close()

    def _check(self) -> None:
        if self.backend is None:
            return
        for check in self._checks:
            try:
                notes = check(self.run_id, self.backend)
            except SandboxError as exc:  # the engine did not answer: the next check tries again
                log.warning("could not check the task sandboxes of %s: %s", self.run_id, exc)
                continue
            for note in notes:
                self.tail.write(f"\n{note}\n")
