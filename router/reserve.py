"""Reserving a call's worst case from the event loop, on PostgreSQL: the same conditional
UPDATE as `services.call_reserve`, sent on an async psycopg connection of the router's own, so
an admitted call costs one database round trip and no hop to a worker thread and back.

A few connections per event loop (`CONNECTIONS`), opened on first use (and again when the
server closed one meanwhile, `_still_open`), each with synchronous_commit off for its
session: they run nothing but these one-statement reservations (see `call_reserve` for why
that is safe: the releasing settlement commits durably).
"""

import asyncio
import select
import weakref

import psycopg
from django.db import connections

from runs.models import Run, Status

CONNECTIONS = 4

_table = Run._meta.db_table
_RESERVE = f"""
    UPDATE "{_table}" SET covered_reserved_micros = covered_reserved_micros + %(amount)s
    WHERE id = %(run_id)s AND status = %(running)s AND covered
      AND covered_cap_micros >= covered_reserved_micros + covered_spent_micros + %(amount)s
"""  # noqa: S608 (the table's name is the model's, the values are parameters)


class _Pool:
    """This event loop's connections: taken one at a time, put back after one statement."""

    def __init__(self) -> None:
        self._idle: list[psycopg.AsyncConnection] = []
        self._slots = asyncio.Semaphore(CONNECTIONS)

    async def _connect(self) -> psycopg.AsyncConnection:
        params = connections["default"].get_connection_params()
        for name in ("cursor_factory", "context", "server_side_binding"):
            params.pop(name, None)
        conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
        await conn.execute("SET synchronous_commit TO OFF")
        return conn

    async def reserve(self, run_id: str, amount: int) -> bool:
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            if conn is None or not _still_open(conn):
                if conn is not None:
                    await conn.close()
                conn = await self._connect()
            try:
                cursor = await conn.execute(
                    _RESERVE, {"amount": amount, "run_id": run_id, "running": Status.RUNNING.value}
                )
            except BaseException:
                # Its state is unknown now (a cancelled statement may still be running):
                # never reused. The reservation, if it went through, stays on the run.
                await conn.close()
                raise
            self._idle.append(conn)
            return cursor.rowcount == 1


def _still_open(conn: psycopg.AsyncConnection) -> bool:
    """Whether an idle connection may take the next statement, without a round trip: the
    server sends an idle connection nothing, so its socket being readable means the backend
    said goodbye (terminated by pg_terminate_backend, a restart or a failover: its FATAL
    error, then end of file). The first call after such a blip then reconnects instead of
    failing with a 500."""
    if conn.closed or conn.broken:
        return False
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return not poller.poll(0)


_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool]" = weakref.WeakKeyDictionary()


async def reserve(run_id: str, amount: int) -> bool:
    """`services.call_reserve` on this event loop's connections (PostgreSQL only)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool()
    return await pool.reserve(run_id, amount)
