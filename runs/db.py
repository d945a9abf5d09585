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


def reconnecting(func: Callable[P, R]) -> Callable[P, R]:
    """Retry `func` on a fresh connection when its connection broke under it."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(RETRIES + 1):
            try:
                return func(*args, **kwargs)
            except (OperationalError, InterfaceError):
                if attempt == RETRIES or connection.in_atomic_block or connection.is_usable():
                    raise  # not a dropped connection, or not ours to reopen: the caller's error
                log.warning("%s: the database connection broke; reconnecting", func.__name__)
                connection.close()
                time.sleep(BACKOFF_SECONDS * 2**attempt)
        raise AssertionError("unreachable")

    return call
