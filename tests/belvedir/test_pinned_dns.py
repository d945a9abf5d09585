"""The router's pinned client resolves a user's base in threads of its own and within the
connect timeout: a name server that never answers fails the connection near that timeout,
and does not hold up another base's call (nor the threads the event loop's other work
shares). Talks only to 127.0.0.1."""

import asyncio
import ipaddress
import threading
import time

import anyio
import httpcore
import pytest

from belvedir import pinned
from tests.helpers.aio import run
from tests.router.fake_upstream import FakeUpstream

SLOW = "slow-dns.example"


@pytest.fixture
def allowed(settings):
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]


def test_a_lookup_that_never_answers_fails_near_the_connect_timeout_and_delays_no_other(
    allowed,
):
    released = threading.Event()

    def resolver(host, port):
        if host == SLOW:
            released.wait(30)  # a name server that does not answer
        return [ipaddress.ip_address("127.0.0.1")]

    async def calls(port: int):
        backend = pinned.PinnedBackend(resolver=resolver)
        # Every other thread the loop shares is busy (the router's other work).
        anyio.to_thread.current_default_thread_limiter().total_tokens = 1
        busy = asyncio.ensure_future(anyio.to_thread.run_sync(released.wait, 30))

        async def slow():
            started = time.monotonic()
            with pytest.raises(httpcore.ConnectTimeout):
                await backend.connect_tcp(SLOW, port, timeout=1.0)
            return time.monotonic() - started

        async def other():
            await asyncio.sleep(0.2)
            started = time.monotonic()
            stream = await backend.connect_tcp("models.example", port, timeout=1.0)
            await stream.aclose()
            return time.monotonic() - started

        try:
            return await asyncio.wait_for(asyncio.gather(slow(), other()), 10)
        finally:
            released.set()
            await busy

    with FakeUpstream() as base:
        slow_took, other_took = run(calls(base.server.server_address[1]), timeout=20)
    assert 0.9 < slow_took < 2.0
    assert other_took < 0.5
