"""The HTTP client of own-key calls: to the model base a run's user named, which the router
must not let reach the platform's own network. Each event loop has one, pinned as
`belvedir.pinned` pins every connection (the host resolved once, its addresses checked by the
model-host policy, the connection made to a checked address; no redirect, no proxy from the
environment); environment generation's own-key calls use the same pinning, synchronously."""

import asyncio
import weakref

import httpx
from django.conf import settings

from belvedir.net_policy import Resolver, resolve
from belvedir.pinned import BaseRefused, PinnedBackend, async_client

__all__ = ["BaseRefused", "PinnedBackend", "client", "new_client"]


def new_client(*, resolver: Resolver = resolve, inner=None) -> httpx.AsyncClient:
    return async_client(
        timeout=httpx.Timeout(settings.BELVEDIR_ROUTER_UPSTREAM_TIMEOUT, connect=10.0),
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        resolver=resolver,
        inner=inner,
    )


_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = (
    weakref.WeakKeyDictionary()
)


def client() -> httpx.AsyncClient:
    """This event loop's own-key client (as `router.upstream.client` is the operator's)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = _clients[loop] = new_client()
    return found
