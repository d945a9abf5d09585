"""The web app under the ASGI server production runs (uvicorn): its requests take their
PostgreSQL connections from a pool. Under Django's ASGI handler each request runs its sync code
in a thread of its own, whose connection died with it: every page and API request started a
backend (bench figures in docs/scaling.md)."""

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.router.helpers import serving_app

pytestmark = pytest.mark.django_db(transaction=True)

POOL = 2


def sessions_started() -> int:
    """Backends ever started on the test database (PostgreSQL counts them as they start)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_requests_share_at_most_the_pool_s_connections(owner, tmp_path):
    with serving_app(tmp_path, BELVEDIR_DB_POOL_MAX_SIZE=str(POOL)) as url:

        def get(_=None) -> int:
            request = urllib.request.Request(
                f"{url}/api/v1/runs", headers={"Authorization": f"Bearer {owner.key}"}
            )
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status

        get()
        time.sleep(1.5)  # its backends' start is counted
        before = sessions_started()
        statuses = [get() for _ in range(12)]
        with ThreadPoolExecutor(6) as threads:  # more at once than the pool holds: they wait
            statuses += list(threads.map(get, range(12)))
        started = 0
        deadline = time.monotonic() + 3  # the counts come in within a second or so
        while time.monotonic() < deadline and started <= POOL:
            started = sessions_started() - before
            time.sleep(0.2)

    assert statuses == [200] * 24
    # A thread per request started a backend for each of the 24.
    assert started <= POOL
