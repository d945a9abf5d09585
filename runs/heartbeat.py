"""A running run's heartbeat, from its worker: the beat the reaper reads, the log tail it
carries, the GPU device's lease, and the checks of the apps above runs (runs/hooks.py)."""

from __future__ import annotations

import logging
import threading

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
    the run's GPU device, if it holds one; with a `backend`, runs the checks of the apps above
    runs (runs/hooks.py: harbor stops the run's task sandboxes on its engine that wrote past
    their disk limit), noting what they say in the log."""

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
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"beat {run_id}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        stage_told = False
        try:
            self._first_check()
            while not self._stop.wait(HEARTBEAT_SECONDS):
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
                    self._check()  # its notes go out with the next beat
                except Exception:  # one failed beat (a dropped connection) must not end them all
                    log.warning("heartbeat of %s failed; trying again", self.run_id, exc_info=True)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection; it would leak otherwise

    def _first_check(self) -> None:
        """The checks once at the claim, before the first beat: harbor's warm task sandboxes
        start while the run's sandbox does (Harbor asks for its first ~2-3 s after the claim)."""
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
