"""The HTTP client of own-key calls: to the model base a run's user named, which the router
must not let reach the platform's own network (an SSRF vector otherwise).

Every connection it opens resolves the host once, checks the addresses with the model-host
policy (`belvedir.net_policy.model_host_refusal`: internal addresses, the platform itself) and
connects to a checked address; TLS is still verified against the host's name. So a name that
resolves to a public address at launch and to an internal one at the call (DNS rebinding)
is refused at the call, and no connection goes anywhere that was not checked. It follows no
redirect, reads no proxy from the environment, and its pool keeps connections by host name.

httpx has no public hook for the network layer, so `PinnedTransport` gives httpcore's
connection pool (whose `network_backend` is that hook) a `PinnedBackend`.
"""

import asyncio
import weakref

import anyio
import httpcore
import httpx
from django.conf import settings

from belvedir.net_policy import HostUnresolved, Resolver, model_host_refusal, resolve


class BaseRefused(Exception):
    """The model base may not be connected to: why (`belvedir.net_policy`)."""


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, resolving and checking each host it is asked to connect
    to, then connecting to the checked address itself."""

    def __init__(self, *, resolver: Resolver = resolve, inner=None) -> None:
        self._resolver = resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = await anyio.to_thread.run_sync(self._resolver, host, port)
        except HostUnresolved as exc:
            raise BaseRefused(str(exc)) from None
        refusal = await anyio.to_thread.run_sync(
            lambda: model_host_refusal(host, port, addresses, resolver=self._resolver)
        )
        if refusal is not None:
            raise BaseRefused(refusal)
        failed: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failed = exc
        raise failed or httpcore.ConnectError(f"no address for {host}")

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise BaseRefused("the router connects to model bases over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, *, limits: httpx.Limits, resolver: Resolver = resolve, inner=None):
        super().__init__(limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=PinnedBackend(resolver=resolver, inner=inner),
        )


def new_client(*, resolver: Resolver = resolve, inner=None) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    return httpx.AsyncClient(
        transport=PinnedTransport(limits=limits, resolver=resolver, inner=inner),
        timeout=httpx.Timeout(settings.BELVEDIR_ROUTER_UPSTREAM_TIMEOUT, connect=10.0),
        follow_redirects=False,
        trust_env=False,
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
