"""Work an app leaves for its ASGI server's shutdown: apps register coroutine functions here
(in their AppConfig.ready) and `belvedir.asgi` awaits each when the server stops (the ASGI
lifespan protocol; uvicorn sends it after the requests in flight are done)."""

import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

_on_shutdown: list[Callable[[], Awaitable[None]]] = []


def on_shutdown(hook: Callable[[], Awaitable[None]]) -> None:
    if hook not in _on_shutdown:
        _on_shutdown.append(hook)


async def shutdown() -> None:
    for hook in _on_shutdown:
        try:
            await hook()
        except Exception:
            log.exception("shutdown: %s failed", getattr(hook, "__qualname__", hook))
