"""The operator's upstream (OpenRouter by default): one shared `httpx.AsyncClient` per event
loop, so connections are pooled and reused across calls."""

import asyncio
import weakref

import httpx
from django.conf import settings

_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = (
    weakref.WeakKeyDictionary()
)


def client() -> httpx.AsyncClient:
    """This event loop's client (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.BELVEDIR_ROUTER_UPSTREAM_TIMEOUT, connect=10.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
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
