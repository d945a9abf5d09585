"""Settling calls in batches, off the calls' path (served by ASGI).

A call hands its `Settlement` (its span, the release of its reservation, its cost) to its
event loop's `Settler`, and one task writes what has gathered in one transaction
(`calls_settle`). A call whose answer waits for its settlement (an error or refusal answer, a
stream the client left) hurries the batch along; an answered call does not, so its
settlement waits at most `BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS` (0.2) for others to share the
write. A waiting settlement only holds its call's reservation a little longer, which can refuse a call early,
never let one past the cap: a call refused for its cap while settlements of its run are
pending has them written first and is tried once more.

Nothing is dropped: a batch that fails is written call by call; a call that still fails is
retried every `RETRY_SECONDS` (the database may be down), after `MAX_SPAN_ATTEMPTS` without its
span (so its money is settled even when its span cannot be stored). Pending settlements are
written when the server shuts down (the ASGI lifespan, `belvedir/lifespan.py`); only a process
killed outright loses what it had not yet written (at most that batch delay's worth of answered
calls: their spans, and their reservations stay on the run, lowering what it may still spend).
"""

import asyncio
import dataclasses
import logging
import weakref

from django.conf import settings

from router.services import Settlement, calls_settle, off_loop

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
MAX_SPAN_ATTEMPTS = 3

_calls_settle = off_loop(calls_settle)


@dataclasses.dataclass(eq=False)
class _Pending:
    settlement: Settlement
    done: asyncio.Future
    attempts: int = 0


class Settler:
    """One event loop's queue of settlements and the task that writes them."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []
        self._writing: list[_Pending] = []
        self._hurry = asyncio.Event()
        self._task: asyncio.Task | None = None

    def submit(self, settlement: Settlement, *, hurry: bool) -> asyncio.Future:
        """Queue a settlement; the future is done once it is written."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._pending.append(_Pending(settlement, done))
        if hurry:
            self._hurry.set()
        if self._task is None or self._task.done():  # the writer runs while there is work
            self._task = loop.create_task(self._run())
        return done

    async def settle(self, settlement: Settlement) -> None:
        """Queue a settlement and wait until it is written (with what else is pending)."""
        await asyncio.shield(self.submit(settlement, hurry=True))

    def pending_for(self, run_id: str) -> bool:
        return any(p.settlement.run_id == run_id for p in self._pending + self._writing)

    async def flush(self) -> None:
        """Write everything pending now; returns when it is written."""
        waiting = [p.done for p in self._pending + self._writing]
        if waiting:
            self._hurry.set()
            await asyncio.gather(*(asyncio.shield(done) for done in waiting))

    async def _run(self) -> None:
        while self._pending:
            if not self._hurry.is_set():  # let more calls join this write
                try:
                    await asyncio.wait_for(
                        self._hurry.wait(), settings.BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS
                    )
                except TimeoutError:
                    pass
            self._hurry.clear()
            self._writing, self._pending = self._pending, []
            failed = await self._write(self._writing)
            self._writing = []
            if failed:
                self._pending[:0] = failed
                await asyncio.sleep(RETRY_SECONDS)
                self._hurry.set()

    async def _write(self, batch: list[_Pending]) -> list[_Pending]:
        """Write the batch; what could not be written (to be retried)."""
        try:
            await _calls_settle([p.settlement for p in batch])
        except Exception:
            if len(batch) == 1:
                return self._failed(batch[0])
            log.exception("router: settling %d calls at once failed; one by one", len(batch))
            failed = []
            for pending in batch:
                failed += await self._write([pending])
            return failed
        for pending in batch:
            if not pending.done.done():
                pending.done.set_result(None)
        return []

    def _failed(self, pending: _Pending) -> list[_Pending]:
        pending.attempts += 1
        settlement = pending.settlement
        log.exception(
            "router: settling a call of %s failed (attempt %d)",
            settlement.run_id,
            pending.attempts,
        )
        if pending.attempts >= MAX_SPAN_ATTEMPTS and settlement.record_span:
            # The money must be settled: from now on without the span that keeps failing.
            pending.settlement = dataclasses.replace(settlement, record_span=False)
        return [pending]


_settlers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Settler]" = (
    weakref.WeakKeyDictionary()
)


def settler() -> Settler:
    """This event loop's settler (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _settlers.get(loop)
    if found is None:
        found = _settlers[loop] = Settler()
    return found


async def drain(timeout: float = 30.0) -> None:
    """Write every pending settlement of this event loop (at server shutdown)."""
    found = _settlers.get(asyncio.get_running_loop())
    if found is not None:
        try:
            await asyncio.wait_for(found.flush(), timeout)
        except TimeoutError:
            log.error("router: pending settlements were not all written in %.0f s", timeout)
