"""Database calls of a long-lived worker that survive a dropped connection.

A run's worker holds its connection for up to an hour; a database restart, a failover or an
operator's `pg_terminate_backend` must not fail a run that finished fine. `@reconnecting`
closes the broken connection and calls the function again (a bounded number of times),
so the next query opens a fresh one. Only outside a transaction, and only for functions
that are safe to repeat.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
RETRIES = 4
BACKOFF_SECONDS = 0.25


# SQLSTATE classes of a lost connection: 08 (connection exception), 57P (the server shut the
# session down: pg_terminate_backend, a restart or crash).
_DROPPED_STATES = ("08", "57P")


def _dropped(exc: Exception) -> bool:
    """Whether `exc` says the connection was lost (rather than a query going wrong).

    By its SQLSTATE when the server said why; else whether the connection still answers. With
    CONN_HEALTH_CHECKS, Django may already have swapped in a fresh connection by now, so the
    SQLSTATE is the better witness."""
    state = getattr(exc.__cause__, "sqlstate", None) or ""
    if state.startswith(_DROPPED_STATES) or isinstance(exc, InterfaceError):
        return True
    return connection.connection is None or not connection.is_usable()


def reconnecting(func: Callable[P, R]) -> Callable[P, R]:
    """Retry `func` on a fresh connection when its connection broke under it."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(RETRIES + 1):
            try:
                return func(*args, **kwargs)
            except (OperationalError, InterfaceError) as exc:
                if attempt == RETRIES or connection.in_atomic_block or not _dropped(exc):
                    raise  # not a dropped connection, or not ours to reopen: the caller's error
                log.warning("%s: the database connection broke; reconnecting", func.__name__)
                connection.close()
                time.sleep(BACKOFF_SECONDS * 2**attempt)
        raise AssertionError("unreachable")

    return call
