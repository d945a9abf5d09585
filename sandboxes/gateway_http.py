"""The HTTP the sandbox gateway reads and writes (`sandboxes.gateway`): which paths a sandbox
may ask for, a request head parsed strictly (`parse_head`) and written anew for the upstream
(`upstream_head`), a body forwarded at a minimum pace, the upstream's reply piped back, and
the gateway's own short answers. Pure asyncio, no Django.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

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
    r"/api/v1/runs/[A-Za-z0-9_-]+/tasks/export",  # a Harbor harness's Tasks as a dataset
    *TASK_SANDBOX_PATHS,
    r"/api/v1/environments/[A-Za-z0-9_-]+/export",
    r"/api/v1/(?:chat/completions|completions|embeddings|responses|messages(?:/count_tokens)?)",
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
    # Set again below for a chunked body: copied as well, the upstream got two (uvicorn
    # refuses such a request: every Node OTLP export through the gateway was a 400).
    "transfer-encoding",
    "upgrade",
    "host",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
}
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Control characters but tab, anywhere in a head line: a bare CR or LF inside a value would
# be a header of its own to a lenient upstream.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
HEAD_LIMIT = 64 * 1024
MAX_HEADERS = 100
CHUNK = 64 * 1024


class TooSlow(Exception):
    """The sandbox sent its request slower than the limits allow."""


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
    if any(_CONTROL.search(line) for line in lines):
        raise BadRequest(400, "control character in the request head")
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


class Pace:
    """Reads of a request body, timed against its minimum rate: by the time the sandbox has
    sent N bytes it may have kept the gateway waiting at most `grace + N / rate` seconds
    (time spent waiting for the upstream to take the bytes does not count)."""

    def __init__(self, grace: float, rate: int) -> None:
        self.grace, self.rate = grace, rate
        self.waited = 0.0
        self.received = 0

    async def read(self, reading) -> bytes:
        allowed = self.grace + self.received / self.rate - self.waited
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            data = await asyncio.wait_for(reading, max(allowed, 0.001))
        except TimeoutError:
            raise TooSlow(f"the request body came slower than {self.rate} bytes/s") from None
        finally:
            self.waited += loop.time() - started
        self.received += len(data)
        return data


async def copy_exact(reader, writer, size: int, pace: Pace) -> None:
    while size > 0:
        data = await pace.read(reader.read(min(CHUNK, size)))
        if not data:
            raise ConnectionError("the request body ended early")
        writer.write(data)
        await writer.drain()
        size -= len(data)


async def copy_chunked(reader, writer, pace: Pace) -> None:
    """Forward a chunked body as it is, reading its framing to know where it ends."""
    while True:
        line = await pace.read(reader.readuntil(b"\r\n"))
        writer.write(line)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ConnectionError("bad chunk size") from None
        if size == 0:
            while True:  # trailers, up to the empty line
                trailer = await pace.read(reader.readuntil(b"\r\n"))
                writer.write(trailer)
                if trailer == b"\r\n":
                    await writer.drain()
                    return
        await copy_exact(reader, writer, size + 2, pace)


async def pipe(reader, writer, timeout: float, send_timeout: float, sent: list[int]) -> None:
    """The upstream's reply to the sandbox as it comes; `sent[0]` counts what was written. A
    sandbox that takes none of it for `send_timeout` seconds loses the connection."""
    while True:
        data = await asyncio.wait_for(reader.read(CHUNK), timeout)
        if not data:
            return
        writer.write(data)
        sent[0] += len(data)
        await asyncio.wait_for(writer.drain(), send_timeout)


_REASONS = {400: "Bad Request", 404: "Not Found", 408: "Request Timeout"}
_REASONS |= {431: "Request Header Fields Too Large", 501: "Not Implemented"}
_REASONS |= {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def reply(writer, status: int, message: str, headers: str = "") -> None:
    body = json.dumps({"detail": message}).encode()
    writer.write(
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{headers}Connection: close\r\n\r\n".encode()
        + body
    )
