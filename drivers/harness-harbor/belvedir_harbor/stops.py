"""The task sandboxes the Belvedir Harbor environment is stopping (environment.py), with the
standard library only.

A trial's stop asks the platform and returns: the kill and removal take 0.2-1 s under gVisor,
and neither the trial's end nor the job's need wait for them. A create waits until every stop
asked before it is answered, so the run never holds more task sandboxes at once than
HARBOR_CONCURRENCY. At the process's end it waits only until each stop has reached the
platform (at most STOP_REACH_S), not for the answers: the platform finishes what it was asked,
and a run's end stops every task sandbox it still has (harbor/hooks.py), so none outlives the
run. The last trials' stops are then not on the run's time.
"""

from __future__ import annotations

import atexit
import threading
import time

STOP_REACH_S = 30.0  # at the end, how long a stop may take to reach the platform


class Stops:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[threading.Thread, threading.Event] = {}

    def start(self, stop, sandbox_id: str, logger) -> None:
        """Run `stop(sandbox_id, sent=...)` in a thread; `sent` is called once the request is
        on its way (TaskSandboxes.stop)."""
        reached = threading.Event()

        def run() -> None:
            try:
                stop(sandbox_id, sent=reached.set)
            except Exception as exc:  # PlatformError, or the connection broke
                logger.error(f"could not stop task sandbox {sandbox_id}: {exc}")
            finally:
                reached.set()
                with self._lock:
                    self._threads.pop(threading.current_thread(), None)

        # A daemon: the interpreter's end does not join it (`reached` below).
        thread = threading.Thread(target=run, name=f"stop {sandbox_id}", daemon=True)
        with self._lock:
            self._threads[thread] = reached
        thread.start()

    def wait(self) -> None:
        """Until every stop asked so far is answered (or failed)."""
        with self._lock:
            pending = list(self._threads)
        for thread in pending:
            thread.join()

    def reached(self) -> None:
        """Until every stop asked so far has reached the platform, STOP_REACH_S at most."""
        with self._lock:
            pending = list(self._threads.values())
        deadline = time.monotonic() + STOP_REACH_S
        for event in pending:
            event.wait(max(0.0, deadline - time.monotonic()))


STOPS = Stops()
atexit.register(STOPS.reached)
