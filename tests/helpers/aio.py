"""asyncio in tests that share a process with the browser tests."""

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor


def run(coro: Coroutine, timeout: float = 60):
    """`asyncio.run(coro)` in a thread of its own: a browser test earlier in the session leaves
    Playwright's event loop set in the main thread, where asyncio.run() refuses to start one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=timeout)
