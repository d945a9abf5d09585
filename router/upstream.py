"""The operator's upstream (OpenRouter by default): one shared `httpx.AsyncClient` per event
loop, so connections are pooled and reused across calls."""

import asyncio
import weakref

import httpx
from django.conf import settings

_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = (
    weakref.WeakKeyDictionary()
)


def new_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(settings.BELVEDIR_ROUTER_UPSTREAM_TIMEOUT, connect=10.0),
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
    )


def client() -> httpx.AsyncClient:
    """This event loop's client (made on first use). Under ASGI the loop is the server's and
    lives as long as the process; a request served by WSGI (its own short loop) takes a
    `new_client()` of its own instead."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = new_client()
        _clients[loop] = found
    return found


def url(path: str) -> str:
    return f"{settings.BELVEDIR_ROUTER_UPSTREAM_BASE}/{path.lstrip('/')}"


def headers() -> dict[str, str]:
    return {
        "Authorization": f"Bearer {settings.BELVEDIR_ROUTER_UPSTREAM_KEY}",
        "Content-Type": "application/json",
        "Accept-Encoding": "identity",
    }
