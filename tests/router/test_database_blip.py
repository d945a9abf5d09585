"""A database blip (every backend terminated, as a restart or a failover does) costs the web
process no failed request: the pool checks a connection before a request gets it
(psycopg_pool's check, on through CONN_HEALTH_CHECKS), and the router's reservation connections
are reopened when the server closed them while they were idle."""

import time

import httpx
import pytest
from django.db import connection

from tests.router.helpers import MODEL, settled

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}


def _terminate_every_other_backend() -> int:
    """Terminate the test database's other backends (the server's pool and the router's
    connections) and wait until they have exited; how many there were."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.05)
    return len(pids)


def test_after_the_database_terminates_every_backend_the_next_requests_succeed(
    owner, covered_run, serve_router, upstream
):
    router = serve_router(BELVEDIR_DB_POOL_MIN_SIZE="2")
    api = router  # the REST API shares the /api/v1 prefix
    calls = {"Authorization": f"Bearer {covered_run.plain_key}"}
    pages = {"Authorization": f"Bearer {owner.key}"}

    def round_of_requests() -> list[int]:
        with httpx.Client(timeout=30) as http:
            return [
                http.get(f"{api}/runs", headers=pages).status_code,
                *(
                    http.post(f"{router}/chat/completions", json=BODY, headers=calls).status_code
                    for _ in range(3)
                ),
                http.get(f"{api}/harnesses", headers=pages).status_code,
            ]

    assert round_of_requests() == [200] * 5  # the pool's and the router's connections open
    assert _terminate_every_other_backend() >= 2

    assert round_of_requests() == [200] * 5
    settled(covered_run, spans=6)
