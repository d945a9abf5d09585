"""The sandbox gateway: the only door from sandboxes into the platform.

A small HTTP/1.1 reverse proxy (asyncio, streaming both ways) bound to the sandbox network's
gateway IP (172.30.0.1:18700 by default), so the platform's own server never has to listen
on an address sandboxes can reach. It forwards only the sandbox-facing endpoints (below) to
the platform's server (the upstream, e.g. http://127.0.0.1:8000); every other path is a 404.
The task-sandbox paths may go to an upstream of their own (`task_upstream`): on a worker host
whose upstream is the load balancer, a platform process on this host, whose Docker engine is
the one the run's task sandboxes must run on (docs/scaling.md).

One request per connection (`Connection: close` both ways), request bodies with a length or
chunked, responses streamed as they come (the router's server-sent events too). The upstream
sees the platform's own Host; X-Forwarded-For/Host carry the sandbox's, and whatever
forwarding headers the sandbox sent are dropped. Pure asyncio, no Django.

No tenant can hold it (`Limits`): open connections are counted in total, per organization, per
run and per source address (whose an address is: sandboxes/gateway_tenants.py), and one
past any of these is answered 503 with `Retry-After` at once. Each connection counts against
its address and the total from the moment it is accepted, while the gateway still asks whose
the address is; one past either cap is answered 503 and closed within `refuse_drain` seconds,
and past `refusing_per_address` such answers in flight from one address (or `refusing` in all)
it is closed on accept without a word (the gateway runs its own accept loop, `Listener`, so
such a connection costs no transport, stream or task), and a flood of connects holds no more
sockets than the caps say.
Refusals are logged at most once per address every `LOG_EVERY` seconds, with their count. A
request head must arrive whole within `head_timeout` seconds and a body at `body_min_rate`
bytes a second after a grace of `body_grace` seconds (as Apache's mod_reqtimeout), else 408
and the connection is closed; a sandbox that stops reading its reply is dropped after
`send_timeout` seconds. A head with a control character but tab in it is a 400.

Why our own code and not a library or another proxy (looked at for issue 21): h11 and
httptools (both installed, under uvicorn) parse HTTP but do no I/O, so the deadlines, the
caps and the tenant accounting that this boundary needs would all still be ours; they would
replace only `parse_head` (~40 lines, in `sandboxes/gateway_http.py`) and the chunk framing, and h11 accepts a request with
both Content-Length and Transfer-Encoding (Transfer-Encoding wins) where we refuse it; a
second parser beside our raw body forwarding would be a smuggling risk of its own. nginx or
HAProxy in front would give timeouts and per-address limits, but neither can count per run or
per organization without an address map regenerated from the Docker engine and reloaded, and
each is one more service on every worker host. So the parser stays small and strict, and the
limits are tested as attacks (tests/runs/test_gateway_limits.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from sandboxes.gateway_http import (
    CHUNK,
    HEAD_LIMIT,
    BadRequest,
    Pace,
    Request,
    TooSlow,
    Upstream,
    copy_chunked,
    copy_exact,
    is_task_sandbox_path,
    parse_head,
    path_allowed,
    pipe,
    reply,
    upstream_head,
)
from sandboxes.gateway_tenants import MappedTenants, Tenant, Tenants

log = logging.getLogger(__name__)

BACKLOG = 1024  # connections the kernel queues for accept (capped by net.core.somaxconn)
LOG_EVERY = 10.0  # seconds between refusal log lines of one address


@dataclass(frozen=True)
class Limits:
    """How much of the gateway one tenant may hold, and how slow a sandbox may be (seconds,
    bytes a second). Sized so that 4 runs of one organization, each a driver with 4 task
    sandboxes in flight (the driver holds a streamed exec per task sandbox, each task sandbox
    its agent's router calls), fit within `per_organization`, which leaves the rest of
    `total` to the other organizations. A connection past `per_address` or `total` is
    answered 503 and closed within `refuse_drain` seconds while fewer than
    `refusing_per_address` such answers (`refusing` in all) are in flight, else closed at
    once without one."""

    total: int = 512
    per_organization: int = 128
    per_run: int = 64
    per_address: int = 32
    head_timeout: float = 10.0
    body_grace: float = 10.0
    body_min_rate: int = 500
    send_timeout: float = 60.0
    retry_after: int = 5
    refusing_per_address: int = 4
    refusing: int = 64
    refuse_drain: float = 0.2


def _release(counts: Counter, keys: list) -> None:
    for key in keys:
        counts[key] -= 1
        if not counts[key]:
            del counts[key]


class Listener:
    """What `Gateway.start()` returns: the listening socket with the gateway's own accept
    loop on it (so a connection past the caps is closed on accept, costing no transport,
    stream or task). `sockets`, `close()`, `serve_forever()` and `async with` as an
    asyncio.Server's."""

    def __init__(self, sock: socket.socket, accept) -> None:
        self.sockets = [sock]
        self._loop = asyncio.get_running_loop()
        self._closed = self._loop.create_future()
        self._loop.add_reader(sock.fileno(), accept, sock)

    def close(self) -> None:
        if not self._closed.done():
            self._loop.remove_reader(self.sockets[0].fileno())
            self.sockets[0].close()
            self._closed.set_result(None)

    async def serve_forever(self) -> None:
        await self._closed

    async def __aenter__(self) -> Listener:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()


class Gateway:
    """Serve with `await Gateway(...).serve()`; `start()` returns its `Listener`."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        upstream: str,
        task_upstream: str | None = None,
        timeout: float = 600.0,
        limits: Limits | None = None,
        tenants: Tenants | None = None,
    ) -> None:
        """`task_upstream`: where the task-sandbox paths go (default: `upstream`). `timeout`:
        idle seconds waiting for the upstream. `tenants`: whose a source address is (an object
        with `async of(address) -> Tenant`, gateway_tenants.py; default: every address its
        own tenant)."""
        self.host, self.port = host, port
        self.upstream = Upstream.parse(upstream)
        self.task_upstream = Upstream.parse(task_upstream) if task_upstream else self.upstream
        self.timeout = timeout
        self.limits = limits or Limits()
        self.tenants = tenants or MappedTenants()
        self._open: Counter[tuple[str, str]] = Counter()
        self._refusing: Counter[tuple[str, str]] = Counter()  # 503s past the door's caps
        self._refusals: dict[str, tuple[float, int]] = {}  # address -> last logged, since
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> Listener:
        family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((self.host, self.port), family=family, backlog=BACKLOG)
        sock.setblocking(False)
        return Listener(sock, self._accept)

    async def serve(self) -> None:
        server = await self.start()
        log.info(
            "sandbox gateway on %s:%s -> %s (task sandboxes -> %s)",
            self.host,
            self.port,
            self.upstream.netloc,
            self.task_upstream.netloc,
        )
        async with server:
            await server.serve_forever()

    def _full_at_door(self, address: str) -> str:
        """What is full for a connection just accepted from `address` ("" if none)."""
        if self._open["address", address] >= self.limits.per_address:
            return f"this sandbox holds {self.limits.per_address} connections to the gateway"
        if self._open["total", ""] >= self.limits.total:
            return f"the gateway holds {self.limits.total} connections"
        return ""

    def _full(self, tenant: Tenant) -> str:
        """What is full for a counted connection once its tenant is known ("" if none)."""
        limits = self.limits
        if self._open["run", tenant.run] >= limits.per_run:
            return f"this run's sandboxes hold {limits.per_run} connections to the gateway"
        if self._open["organization", tenant.organization] >= limits.per_organization:
            return (
                f"this organization's sandboxes hold {limits.per_organization} connections "
                "to the gateway"
            )
        return ""

    def _accept(self, listening: socket.socket) -> None:
        """Take what the kernel queued. Each connection counts against its address and the
        total from here; one past either cap is given a 503 (`_turn_away`) while few are in
        flight, else closed at once, before any transport, stream or task is made of it."""
        loop = asyncio.get_running_loop()
        limits = self.limits
        for _ in range(BACKLOG):
            try:
                conn, address = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: pause a second, as asyncio does
                log.warning("sandbox gateway: cannot accept: %s", exc)
                loop.remove_reader(listening.fileno())
                loop.call_later(1, self._resume, listening)
                return
            peer = address[0]
            keys = [("address", peer), ("total", "")]
            full = self._full_at_door(peer)
            if full:
                self._log_refusal(peer, full)
                if (
                    self._refusing["address", peer] >= limits.refusing_per_address
                    or self._refusing["total", ""] >= limits.refusing
                ):
                    conn.close()
                    continue
                self._refusing.update(keys)
                serving = self._turn_away(conn, peer, full, keys)
            else:
                self._open.update(keys)  # counted from here until it is closed, lookup included
                serving = self._serve(conn, peer, keys)
            task = loop.create_task(serving)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _resume(self, listening: socket.socket) -> None:
        if listening.fileno() != -1:
            asyncio.get_running_loop().add_reader(listening.fileno(), self._accept, listening)

    async def _serve(self, conn: socket.socket, peer: str, keys: list) -> None:
        writer = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=HEAD_LIMIT)
            self._writers.add(writer)
            tenant = await self.tenants.of(peer)
            full = self._full(tenant)
            if full:
                self._log_refusal(peer, f"{tenant.organization}: {full}")
                retry = f"Retry-After: {self.limits.retry_after}\r\n"
                await self._refuse(reader, writer, 503, f"{full}; try again later", retry)
                return
            more = [("run", tenant.run), ("organization", tenant.organization)]
            self._open.update(more)
            keys += more
            await self._exchange(reader, writer, peer)
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass  # the sandbox or the upstream went away (OSError: ENOTCONN, EPIPE, resets)
        except Exception:
            log.exception("sandbox gateway: request from %s failed", peer)
        finally:
            if writer is None:
                conn.close()
            else:
                await self._close(writer)
                self._writers.discard(writer)
            _release(self._open, keys)

    async def _turn_away(self, conn: socket.socket, peer: str, full: str, keys: list) -> None:
        """A connection past its address's cap or the total, never counted there: a 503,
        closed within `refuse_drain` seconds."""
        limits = self.limits
        writer = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=HEAD_LIMIT)
            self._writers.add(writer)
            retry = f"Retry-After: {limits.retry_after}\r\n"
            reply(writer, 503, f"{full}; try again later", retry)
            with contextlib.suppress(TimeoutError, OSError):
                async with asyncio.timeout(limits.refuse_drain):
                    await writer.drain()
                    writer.write_eof()
                    while await reader.read(CHUNK):
                        pass
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # it does not even take the answer
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), limits.refuse_drain)
        except OSError:
            pass
        finally:
            if writer is None:
                conn.close()
            else:
                writer.transport.abort()  # nothing if closed already
                self._writers.discard(writer)
            _release(self._refusing, keys)

    def _log_refusal(self, peer: str, why: str) -> None:
        """One warning per address per `LOG_EVERY` seconds, saying how many were refused."""
        now = time.monotonic()
        last, count = self._refusals.get(peer, (float("-inf"), 0))
        if now - last < LOG_EVERY:
            self._refusals[peer] = (last, count + 1)
            return
        if len(self._refusals) > 4096:  # forget addresses not refused for a while
            self._refusals = {
                a: seen for a, seen in self._refusals.items() if now - seen[0] < LOG_EVERY
            }
        self._refusals[peer] = (now, 0)
        more = f" (and {count} more since the last line)" if count else ""
        log.warning("sandbox gateway: %s refused: %s%s", peer, why, more)

    async def _refuse(self, reader, writer, status: int, message: str, headers: str = "") -> None:
        """Answer before the request was read whole, then take what the sandbox still sends
        for a moment (closing with its request unread would reset the connection, and the
        answer with it, before the sandbox reads it)."""
        reply(writer, status, message, headers)
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(writer.drain(), 1)
            writer.write_eof()
            async with asyncio.timeout(1):
                while await reader.read(CHUNK):
                    pass

    async def _close(self, writer) -> None:
        """Close, waiting at most `send_timeout` for the sandbox to take what is left."""
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), self.limits.send_timeout)
        except TimeoutError:
            writer.transport.abort()
        except Exception:
            pass

    async def _exchange(self, reader, writer, peer: str) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.head_timeout)
        except asyncio.LimitOverrunError:
            await self._refuse(reader, writer, 431, "request head too large")
            return
        except TimeoutError:
            await self._refuse(
                reader, writer, 408, f"no request head within {self.limits.head_timeout:g} s"
            )
            return
        try:
            request = parse_head(head)
        except BadRequest as exc:
            await self._refuse(reader, writer, exc.status, exc.message)
            return
        if not path_allowed(request.target):
            log.info(
                "sandbox gateway: %s %s from %s refused", request.method, request.target[:200], peer
            )
            await self._refuse(reader, writer, 404, "not available to sandboxes")
            return
        upstream = self.task_upstream if is_task_sandbox_path(request.target) else self.upstream
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(upstream.host, upstream.port), 10
            )
        except (TimeoutError, OSError) as exc:
            log.warning("sandbox gateway: upstream %s unreachable: %s", upstream.netloc, exc)
            await self._refuse(reader, writer, 502, "the platform does not answer")
            return
        try:
            up_writer.write(upstream_head(request, upstream, peer))
            await up_writer.drain()
            await self._forward(request, reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _forward(self, request: Request, reader, writer, up_reader, up_writer) -> None:
        """The body up while the reply comes down. A body too slow is a 408 (if no reply has
        begun) and ends both; any other broken body ends them without one."""
        pace = Pace(self.limits.body_grace, self.limits.body_min_rate)
        if request.chunked:
            body = copy_chunked(reader, up_writer, pace)
        else:
            body = copy_exact(reader, up_writer, request.length or 0, pace)
        sent = [0]
        sending = asyncio.ensure_future(body)
        piping = asyncio.ensure_future(
            pipe(up_reader, writer, self.timeout, self.limits.send_timeout, sent)
        )
        try:
            await asyncio.wait({sending, piping}, return_when=asyncio.FIRST_COMPLETED)
            failed = sending.done() and not sending.cancelled() and sending.exception()
            if not failed:
                await piping
            elif isinstance(failed, TooSlow) and not sent[0]:
                piping.cancel()  # nothing of a late reply may follow the 408
                with contextlib.suppress(BaseException):
                    await piping
                if not sent[0]:
                    await self._refuse(reader, writer, 408, str(failed))
        finally:
            for task in (sending, piping):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class GatewayThread:
    """A gateway on its own event loop in a daemon thread, on the first free port of `ports`
    (for tests, benchmarks and `make up`'s helpers); `url` says where it listens."""

    def __init__(
        self,
        *,
        host: str,
        ports: Iterable[int],
        upstream: str,
        task_upstream: str | None = None,
        timeout: float = 600.0,
        limits: Limits | None = None,
        tenants: Tenants | None = None,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: Listener | None = None
        self._gateway: Gateway | None = None
        for port in ports:
            gateway = Gateway(
                host=host,
                port=port,
                upstream=upstream,
                task_upstream=task_upstream,
                timeout=timeout,
                limits=limits,
                tenants=tenants,
            )
            started = asyncio.run_coroutine_threadsafe(gateway.start(), self._loop)
            try:
                self._server = started.result(10)
            except OSError:
                continue  # taken: try the next port
            self._gateway = gateway
            self.port = self._server.sockets[0].getsockname()[1]  # port 0: the one given
            self.url = f"http://{host}:{self.port}"
            return
        self.stop()
        raise OSError(f"no free port for a sandbox gateway on {host} in {ports}")

    def open_connections(self) -> int:
        """How many connections the gateway counts now."""
        return self._gateway._open["total", ""] if self._gateway is not None else 0

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            if self._gateway is not None:
                for writer in list(self._gateway._writers):  # connections still open: end them
                    writer.transport.abort()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if pending:
                await asyncio.wait(pending, timeout=5)

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()
