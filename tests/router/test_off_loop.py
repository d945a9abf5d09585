"""The router's database work runs off the event loop in long-lived executor threads
(`router.services.off_loop`): each call gives its connection back as it ends, so in the web
process (its connections from a pool, CONN_MAX_AGE 0) no idle thread holds one of the pool's."""

import pytest
from django.db import connection, connections

from router.services import off_loop
from tests.helpers import aio

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_call_off_the_loop_gives_its_connection_back_as_it_ends(monkeypatch):
    # As in the pooled web process: a connection is obsolete as soon as a call is over.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    used = []

    def query() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            used.append(connections["default"])  # this thread's wrapper
            return cursor.fetchone()[0]

    assert aio.run(off_loop(query)()) == 1
    [wrapper] = used
    assert wrapper.connection is None  # closed (in the web process: back in the pool)
