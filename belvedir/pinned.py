"""HTTP clients for calls the platform makes to a model base its user named (the router's
own-key calls, an environment generation with the user's key): the base must not let them
reach the platform's own network (an SSRF vector otherwise).

Every connection resolves the host once, checks the addresses with the model-host policy
(`belvedir.net_policy.model_host_refusal`: internal addresses, the platform itself) and
connects to a checked address; TLS is still verified against the host's name (httpcore gives
the origin's name as SNI, and the request keeps it as its Host). So a name that resolves to a
public address when it is checked and to an internal one at the call (DNS rebinding) is
refused at the call, and no connection goes anywhere that was not checked. The clients follow
no redirect and read no proxy setting from the environment (a proxy would resolve the name
again); the certificate authorities are the operator's SSL_CERT_FILE or SSL_CERT_DIR where set
(as httpx reads them: behind a TLS-intercepting proxy, or a provider with a private CA), else
the bundled ones. Their pools keep connections by host name.

httpx has no public hook for the network layer, so the transports are given an httpcore
connection pool whose `network_backend` (that hook) is a pinned one: `PinnedBackend` for the
router's async client, `SyncPinnedBackend` for a worker's. The async one resolves in threads
of its own (`RESOLVING`, not anyio's shared default limiter) within the connect timeout.

What such a base answers is read with bounds by its callers (`router.bodies`,
`harnesses.model_client`); of an error answer only an OpenAI-style error's message is shown
(`error_message`), the key redacted: the base may be anything.
"""

import json

import anyio
import httpcore
import httpx

from belvedir.net_policy import Address, HostUnresolved, Resolver, model_host_refusal, resolve

CONNECT_ERRORS = (httpcore.ConnectError, httpcore.ConnectTimeout)

# Lookups at once for the async backend's hosts: a slow name server holds these threads, not
# the ones every other `anyio.to_thread` user of the loop shares.
RESOLVING = 16
ERROR_MESSAGE_CHARS = 300


class BaseRefused(Exception):
    """The model base may not be connected to: why (`belvedir.net_policy`)."""


def checked_addresses(host: str, port: int, resolver: Resolver = resolve) -> list[Address]:
    """The host's addresses, resolved once, that a connection may go to; BaseRefused when the
    name does not resolve or the policy refuses them."""
    try:
        addresses = resolver(host, port)
    except HostUnresolved as exc:
        raise BaseRefused(str(exc)) from None
    refusal = model_host_refusal(host, port, addresses, resolver=resolver)
    if refusal is not None:
        raise BaseRefused(refusal)
    if not addresses:
        raise BaseRefused(f"the host {host} has no address")
    return addresses


def openai_error(content: bytes) -> dict | None:
    """The error object of an OpenAI-style error answer (`{"error": {...}}`), else None."""
    try:
        document = json.loads(content)
    except (ValueError, RecursionError):
        return None
    error = document.get("error") if isinstance(document, dict) else None
    return error if isinstance(error, dict) else None


def error_message(content: bytes, key: str) -> str:
    """What a user's base's error answer may show: the message of an OpenAI-style error, the
    key replaced if it is echoed, cut short; "" for anything else (its body is not shown)."""
    error = openai_error(content)
    message = str(error.get("message") or "") if error is not None else ""
    if len(key) >= 4:
        message = message.replace(key, "[redacted]")
    return message[:ERROR_MESSAGE_CHARS]


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's async network backend, resolving and checking each host it is asked to
    connect to (in its own threads, within the connect timeout), then connecting to a checked
    address itself."""

    def __init__(self, *, resolver: Resolver = resolve, inner=None) -> None:
        self._resolver = resolver
        self._inner = inner or httpcore.AnyIOBackend()
        self._resolving = anyio.CapacityLimiter(RESOLVING)

    async def _checked(self, host: str, port: int, timeout: float | None) -> list[Address]:
        """The checked addresses; httpcore's ConnectTimeout when the lookup takes longer than
        the connect timeout (its thread is left to finish on its own)."""
        try:
            with anyio.fail_after(timeout):
                return await anyio.to_thread.run_sync(
                    checked_addresses,
                    host,
                    port,
                    self._resolver,
                    abandon_on_cancel=True,
                    limiter=self._resolving,
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took over {timeout} s") from None

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = await self._checked(host, port, timeout)
        options = {"timeout": timeout, "local_address": local_address}
        *others, last = addresses
        for address in others:  # the next one when an address does not answer
            try:
                return await self._inner.connect_tcp(
                    str(address), port, **options, socket_options=socket_options
                )
            except CONNECT_ERRORS:
                pass
        return await self._inner.connect_tcp(
            str(last), port, **options, socket_options=socket_options
        )

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise BaseRefused("model bases are connected to over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class SyncPinnedBackend(httpcore.NetworkBackend):
    """`PinnedBackend` for a synchronous client (a worker's job)."""

    def __init__(self, *, resolver: Resolver = resolve, inner=None) -> None:
        self._resolver = resolver
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        options = {"timeout": timeout, "local_address": local_address}
        *others, last = checked_addresses(host, port, self._resolver)
        for address in others:
            try:
                return self._inner.connect_tcp(
                    str(address), port, **options, socket_options=socket_options
                )
            except CONNECT_ERRORS:
                pass
        return self._inner.connect_tcp(str(last), port, **options, socket_options=socket_options)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise BaseRefused("model bases are connected to over TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _client(client, transport, pool, backend, *, timeout, limits: httpx.Limits):
    """An httpx `client` whose `transport` sends through an httpcore `pool` over the pinned
    `backend`: no redirect followed, no proxy read from the environment, only its CAs."""
    sending = transport(limits=limits, trust_env=False)
    sending._pool = pool(
        ssl_context=httpx.create_ssl_context(trust_env=True),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=backend,
    )
    return client(transport=sending, timeout=timeout, follow_redirects=False, trust_env=False)


def async_client(
    *, timeout: httpx.Timeout, limits: httpx.Limits, resolver: Resolver = resolve, inner=None
) -> httpx.AsyncClient:
    """The router's: `PinnedBackend` under an async client."""
    backend = PinnedBackend(resolver=resolver, inner=inner)
    return _client(
        httpx.AsyncClient,
        httpx.AsyncHTTPTransport,
        httpcore.AsyncConnectionPool,
        backend,
        timeout=timeout,
        limits=limits,
    )


def sync_client(
    *, timeout: float | httpx.Timeout, resolver: Resolver = resolve, inner=None
) -> httpx.Client:
    """A worker's (environment generation): `SyncPinnedBackend` under a client of its own."""
    backend = SyncPinnedBackend(resolver=resolver, inner=inner)
    limits = httpx.Limits(max_connections=10, max_keepalive_connections=2)
    return _client(
        httpx.Client,
        httpx.HTTPTransport,
        httpcore.ConnectionPool,
        backend,
        timeout=timeout,
        limits=limits,
    )
