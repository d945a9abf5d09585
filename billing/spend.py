"""The spend cap: model usage the platform pays for, reserved before each call and settled
after it, against the cap of what spends it (a covered run, a covered environment generation:
any `billing.models.SpendCapped` row).

One SQL text reserves (`RESERVE_SQL`: a conditional UPDATE of the spender's row, which
PostgreSQL applies under the row's lock and re-checks against the row as the previous holder
left it, so concurrent calls never reserve past the cap together) and one settles
(`SETTLE_SQL`). Reserving runs either through Django's connection (`spend_reserve`) or, from an
event loop, on a few async psycopg connections of its own (`spend_reserve_async`: one round
trip, no hop to a worker thread).


A call is charged at most what it reserved (`Charge`): an upstream reporting more usage than
the reservation allowed for (provider-side prompts, tools, images, a routed model that
tokenizes otherwise) is charged the reservation and the rest is recorded as excess
(`covered_excess_micros`, `covered_excess_calls`: "upstream reported more than reserved"),
never spent. So reserved + spent never passes the cap, whatever an upstream reports, and a
spender whose cap is reached admits no further call.
"""

import asyncio
import dataclasses
import select
import weakref
from collections.abc import Iterable

import psycopg
from django.db import connection, connections, transaction

from billing.models import SpendCapped

RUNNING = "running"  # the status whose spender may reserve (`SpendCapped`)
CONNECTIONS = 4  # async connections per event loop (`spend_reserve_async`)

RESERVE_SQL = """
    UPDATE "{table}" SET covered_reserved_micros = covered_reserved_micros + %(amount)s
    WHERE id = %(id)s AND status = %(running)s AND covered
      AND covered_reserved_micros + covered_spent_micros < covered_cap_micros
      AND covered_cap_micros >= covered_reserved_micros + covered_spent_micros + %(amount)s
"""  # noqa: S608 (the table's name is the model's, the values are parameters)
SETTLE_SQL = """
    UPDATE "{table}" SET covered_reserved_micros = covered_reserved_micros - %(released)s,
      covered_spent_micros = covered_spent_micros + %(charged)s,
      covered_excess_micros = covered_excess_micros + %(excess)s,
      covered_excess_calls = covered_excess_calls + %(excess_calls)s
    WHERE id = %(id)s
"""  # noqa: S608


@dataclasses.dataclass(frozen=True)
class Charge:
    """One call's settlement: what it reserved, and what its usage as the upstream reported
    it costs. It is charged at most its reservation; the rest is its excess."""

    account_id: str
    reserved_micros: int
    cost_micros: int

    @property
    def charged_micros(self) -> int:
        return min(max(self.cost_micros, 0), max(self.reserved_micros, 0))

    @property
    def excess_micros(self) -> int:
        return max(self.cost_micros, 0) - self.charged_micros


def _sql(text: str, account: type[SpendCapped]) -> str:
    return text.format(table=account._meta.db_table)


def _reserve_params(account_id: str, amount: int) -> dict:
    return {"amount": amount, "id": account_id, "running": RUNNING}


def spend_reserve(*, account: type[SpendCapped], account_id: str, amount: int) -> bool:
    """Add `amount` to the spender's reservation if it is running and covered and it fits
    under the cap; whether it did.

    The commit does not wait for its WAL to reach the disk (synchronous_commit off for this
    transaction alone): other transactions see the reservation at once, which is all the cap
    needs, and the settlement that releases it commits durably, flushing the WAL up to and past
    this commit, so a crash can never keep a release and lose its reservation. It saves a disk
    flush (0.5 ms idle, several on a busy machine) on every call's path."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            cursor.execute(_sql(RESERVE_SQL, account), _reserve_params(account_id, amount))
            return cursor.rowcount == 1


def spend_settle(*, account: type[SpendCapped], charges: Iterable[Charge]) -> None:
    """Release the charges' reservations and add what they are charged (each at most its
    reservation) to their spenders' spend, and the rest to their excess, in one transaction.
    The rows are updated in id order (concurrent settlements never deadlock); in a caller's
    transaction, last, so their locks (which every reservation needs) are held briefly."""
    totals: dict[str, list[int]] = {}
    for charge in charges:
        total = totals.setdefault(charge.account_id, [0, 0, 0, 0])
        total[0] += charge.reserved_micros
        total[1] += charge.charged_micros
        total[2] += charge.excess_micros
        total[3] += 1 if charge.excess_micros else 0
    rows = [
        {"id": account_id, "released": r, "charged": c, "excess": e, "excess_calls": n}
        for account_id, (r, c, e, n) in sorted(totals.items())
        if r or c or e
    ]
    if not rows:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        for row in rows:
            cursor.execute(_sql(SETTLE_SQL, account), row)


class _Pool:
    """This event loop's connections: taken one at a time, put back after one statement. Each
    runs with synchronous_commit off for its session: it runs nothing but reservations (see
    `spend_reserve` for why that is safe)."""

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

    async def reserve(self, sql: str, params: dict) -> bool:
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            if conn is None or not _still_open(conn):
                if conn is not None:
                    await conn.close()
                conn = await self._connect()
            try:
                cursor = await conn.execute(sql, params)
            except BaseException:
                # Its state is unknown now (a cancelled statement may still be running):
                # never reused. The reservation, if it went through, stays on the row.
                await conn.close()
                raise
            self._idle.append(conn)
            return cursor.rowcount == 1


def _still_open(conn: psycopg.AsyncConnection) -> bool:
    """Whether an idle connection may take the next statement, without a round trip: the
    server sends an idle connection nothing, so its socket being readable means the backend
    said goodbye (terminated by pg_terminate_backend, a restart or a failover: its FATAL
    error, then end of file). The first call after such a blip then reconnects instead of
    failing."""
    if conn.closed or conn.broken:
        return False
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return not poller.poll(0)


_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool]" = weakref.WeakKeyDictionary()


async def spend_reserve_async(*, account: type[SpendCapped], account_id: str, amount: int) -> bool:
    """`spend_reserve` from the event loop, on its own connections (PostgreSQL only)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool()
    return await pool.reserve(_sql(RESERVE_SQL, account), _reserve_params(account_id, amount))
