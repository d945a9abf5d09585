"""A run's sandbox launched when the worker's disk has room for it: every sandbox's quota
volume is promised in full (sandboxes/diskquota.py check_room), so on a busy host a launch can
find no room that other sandboxes are about to give back (a new user's `make up` starts four
runs at once, 10 GiB each, on a host whose free disk swings)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings

from runs.logtail import LogTail
from sandboxes.base import NoRoom, SandboxBackend, SandboxHandle, SandboxSpec

POLL_SECONDS = 2.0  # how often a run waiting for room on the disk tries again


def launch_when_room(
    backend: SandboxBackend,
    spec: SandboxSpec,
    *,
    still_running: Callable[[], bool],
    tail: LogTail,
) -> SandboxHandle | None:
    """The run's sandbox. One that finds no room waits for other sandboxes to end and give
    theirs back, up to BELVEDIR_DISK_ROOM_WAIT s, saying so once in its log, then fails
    saying why (NoRoom; at once where even their room would not do); None if the run ended
    meanwhile (`still_running` false: cancelled, reaped)."""
    deadline = time.monotonic() + settings.BELVEDIR_DISK_ROOM_WAIT
    told = False
    while True:
        try:
            return backend.launch(spec)
        except NoRoom as exc:
            if not exc.later or time.monotonic() + POLL_SECONDS > deadline:
                raise  # larger than the disk could ever keep, or waited long enough
            if not told:
                tail.write(
                    f"belvedir: {exc}; the run waits up to {settings.BELVEDIR_DISK_ROOM_WAIT} s "
                    "for other runs to give theirs back (BELVEDIR_DISK_ROOM_WAIT).\n"
                )
                told = True
        time.sleep(POLL_SECONDS)
        if not still_running():
            return None
