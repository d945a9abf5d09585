"""Start `count` threads at once on a barrier; each calls `target(i)` on its own connection."""

import threading
from collections.abc import Callable

from django.db import connection

from belvedir.errors import DomainError


def race(count: int, target: Callable[[int], object]) -> tuple[list, list[str], list[str]]:
    """(what the calls returned, the codes of the domain errors refused, anything else raised)."""
    barrier = threading.Barrier(count)
    done, refused, crashed = [], [], []

    def go(i: int):
        try:
            barrier.wait(timeout=30)
            done.append(target(i))
        except DomainError as exc:
            refused.append(exc.code)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            crashed.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return done, refused, crashed
