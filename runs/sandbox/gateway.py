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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)

# Full matches on the path; both the path as sent and its percent-decoding must match.
TASK_SANDBOX_PATHS = [
    r"/api/v1/runs/[A-Za-z0-9_-]+/task-sandboxes",
    r"/api/v1/task-sandboxes",
    r"/api/v1/task-sandboxes/[A-Za-z0-9_-]+",
    r"/api/v1/task-sandboxes/[A-Za-z0-9_-]+/(?:exec|files)",
]
SANDBOX_PATHS = [
    r"/api/v1/traces",
    r"/api/v1/outcomes",
    r"/api/v1/runs/[A-Za-z0-9_-]+/tasks",
    *TASK_SANDBOX_PATHS,
    r"/api/v1/environments/[A-Za-z0-9_-]+/export",
    r"/api/v1/chat/completions",
    r"/api/v1/models",
    r"/api/v1/adapters/[A-Za-z0-9_./-]+",
    r"/git/[A-Za-z0-9_-]+\.git/[A-Za-z0-9_./-]+",
]
_ALLOWED = [re.compile(pattern) for pattern in SANDBOX_PATHS]
_TASK_SANDBOX = [re.compile(pattern) for pattern in TASK_SANDBOX_PATHS]
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
}
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
HEAD_LIMIT = 64 * 1024
MAX_HEADERS = 100
CHUNK = 64 * 1024


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Upstream:
    host: str
    port: int
    netloc: str

    @classmethod
    def parse(cls, url: str) -> Upstream:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"the upstream must be a plain http://host:port URL, not {url!r}")
        return cls(host=parts.hostname, port=parts.port or 80, netloc=parts.netloc)


def path_allowed(target: str) -> bool:
    """Whether a request target is one of the sandbox-facing endpoints."""
    if not target.startswith("/"):
        return False  # absolute-form or authority-form: not for us
    path = target.split("?", 1)[0]
    decoded = unquote(path)
    if "//" in decoded or "\\" in decoded or any(ord(c) < 33 for c in decoded):
        return False
    if any(segment in (".", "..") for segment in decoded.split("/")):
        return False
    return any(p.fullmatch(path) for p in _ALLOWED) and any(p.fullmatch(decoded) for p in _ALLOWED)


def is_task_sandbox_path(target: str) -> bool:
    """Whether an allowed request target is one of the task-sandbox endpoints."""
    path = target.split("?", 1)[0]
    return any(p.fullmatch(path) for p in _TASK_SANDBOX)


@dataclass
class Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    length: int | None  # Content-Length, or None
    chunked: bool


def parse_head(head: bytes) -> Request:
    """The request line and headers; BadRequest for anything ambiguous or malformed."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # latin-1 decodes any byte; kept for clarity
        raise BadRequest(400, "undecodable request") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(400, "bad request line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name) or line[0] in " \t":
            raise BadRequest(400, "bad header line")
        headers.append((name, value.strip()))
    if len(headers) > MAX_HEADERS:
        raise BadRequest(431, "too many headers")
    lengths = {v for n, v in headers if n.lower() == "content-length"}
    encodings = [v.lower() for n, v in headers if n.lower() == "transfer-encoding"]
    if encodings and lengths:
        raise BadRequest(400, "both Content-Length and Transfer-Encoding")
    if encodings and encodings != ["chunked"]:
        raise BadRequest(501, "only chunked transfer encoding is supported")
    length = None
    if lengths:
        if len(lengths) > 1 or not next(iter(lengths)).isdigit():
            raise BadRequest(400, "bad Content-Length")
        length = int(next(iter(lengths)))
    return Request(parts[0], parts[1], headers, length, bool(encodings))


def upstream_head(request: Request, upstream: Upstream, peer: str) -> bytes:
    named = {
        token.strip().lower()
        for n, v in request.headers
        if n.lower() == "connection"
        for token in v.split(",")
    }
    lines = [f"{request.method} {request.target} HTTP/1.1", f"Host: {upstream.netloc}"]
    sandbox_host = ""
    for name, value in request.headers:
        lower = name.lower()
        if lower == "host":
            sandbox_host = value
        if lower in _HOP_BY_HOP or lower in named:
            continue
        lines.append(f"{name}: {value}")
    if request.chunked:
        lines.append("Transfer-Encoding: chunked")
    lines += [f"X-Forwarded-For: {peer}", "X-Forwarded-Proto: http", "Connection: close"]
    if sandbox_host:
        lines.append(f"X-Forwarded-Host: {sandbox_host}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _copy_exact(reader, writer, size: int, timeout: float) -> None:
    while size > 0:
        data = await asyncio.wait_for(reader.read(min(CHUNK, size)), timeout)
        if not data:
            raise ConnectionError("the request body ended early")
        writer.write(data)
        await writer.drain()
        size -= len(data)


async def _copy_chunked(reader, writer, timeout: float) -> None:
    """Forward a chunked body as it is, reading its framing to know where it ends."""
    while True:
        line = await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)
        writer.write(line)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ConnectionError("bad chunk size") from None
        if size == 0:
            while True:  # trailers, up to the empty line
                trailer = await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)
                writer.write(trailer)
                if trailer == b"\r\n":
                    await writer.drain()
                    return
        await _copy_exact(reader, writer, size + 2, timeout)


async def _pipe(reader, writer, timeout: float) -> None:
    while True:
        data = await asyncio.wait_for(reader.read(CHUNK), timeout)
        if not data:
            return
        writer.write(data)
        await writer.drain()


def _reply(writer, status: int, message: str) -> None:
    reasons = {400: "Bad Request", 404: "Not Found", 431: "Request Header Fields Too Large"}
    reasons |= {501: "Not Implemented", 502: "Bad Gateway", 504: "Gateway Timeout"}
    body = json.dumps({"detail": message}).encode()
    writer.write(
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


class Gateway:
    """Serve with `await Gateway(...).serve()`; `start()` returns the asyncio server."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        upstream: str,
        task_upstream: str | None = None,
        timeout: float = 600.0,
        max_connections: int = 256,
        per_sandbox: int = 32,
    ) -> None:
        """At most `max_connections` at once, `per_sandbox` of them from one address (so one
        sandbox holding connections open cannot lock the others out). `task_upstream`: where
        the task-sandbox paths go (default: `upstream`)."""
        self.host, self.port = host, port
        self.upstream = Upstream.parse(upstream)
        self.task_upstream = Upstream.parse(task_upstream) if task_upstream else self.upstream
        self.timeout = timeout
        self._slots = asyncio.Semaphore(max_connections)
        self.per_sandbox = per_sandbox
        self._open: dict[str, int] = {}
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> asyncio.Server:
        return await asyncio.start_server(self._handle, self.host, self.port, limit=HEAD_LIMIT)

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

    async def _handle(self, reader, writer) -> None:
        peer = (writer.get_extra_info("peername") or ("?",))[0]
        if self._open.get(peer, 0) >= self.per_sandbox:
            log.warning("sandbox gateway: %s holds %d connections; refused", peer, self.per_sandbox)
            writer.close()
            return
        self._open[peer] = self._open.get(peer, 0) + 1
        self._writers.add(writer)
        try:
            async with self._slots:
                await self._exchange(reader, writer, peer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("sandbox gateway: request from %s failed", peer)
        finally:
            self._writers.discard(writer)
            self._open[peer] -= 1
            if not self._open[peer]:
                del self._open[peer]
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _exchange(self, reader, writer, peer: str) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except asyncio.LimitOverrunError:
            _reply(writer, 431, "request head too large")
            return
        try:
            request = parse_head(head)
        except BadRequest as exc:
            _reply(writer, exc.status, exc.message)
            return
        if not path_allowed(request.target):
            log.info(
                "sandbox gateway: %s %s from %s refused", request.method, request.target[:200], peer
            )
            _reply(writer, 404, "not available to sandboxes")
            return
        upstream = self.task_upstream if is_task_sandbox_path(request.target) else self.upstream
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(upstream.host, upstream.port), 10
            )
        except (TimeoutError, OSError) as exc:
            log.warning("sandbox gateway: upstream %s unreachable: %s", upstream.netloc, exc)
            _reply(writer, 502, "the platform does not answer")
            return
        try:
            up_writer.write(upstream_head(request, upstream, peer))
            await up_writer.drain()
            if request.chunked:
                body = _copy_chunked(reader, up_writer, self.timeout)
            else:
                body = _copy_exact(reader, up_writer, request.length or 0, self.timeout)
            sending = asyncio.ensure_future(body)

            def body_done(task: asyncio.Future) -> None:
                if not task.cancelled() and task.exception() is not None:
                    up_writer.close()  # a broken body: the upstream sees the end and gives up

            sending.add_done_callback(body_done)
            try:
                await _pipe(up_reader, writer, self.timeout)
            finally:
                sending.cancel()
                with contextlib.suppress(BaseException):
                    await sending
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()


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
        per_sandbox: int = 32,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None
        self._gateway: Gateway | None = None
        for port in ports:
            gateway = Gateway(
                host=host,
                port=port,
                upstream=upstream,
                task_upstream=task_upstream,
                timeout=timeout,
                per_sandbox=per_sandbox,
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
