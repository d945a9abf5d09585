"""The sandbox gateway cannot be held by one tenant (issue 21, finding 4): connections counted per
address, run and organization, deadlines on the request head and body, 503 at once when full.

The source addresses are loopback ones (127.0.0.x, bound with `source_address`), mapped to
runs and organizations as the Docker engine's containers would be (`MappedTenants`)."""

import asyncio
import contextlib
import http.server
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandboxes.gateway import GatewayThread, Limits
from sandboxes.gateway_tenants import MappedTenants, Tenant, stranger
from tests.runs.helpers import wait_for
from tests.runs.test_gateway import Recorder, recording_server

TASKS = b"GET /api/v1/runs/run_b/tasks HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def upstream():
    Recorder.seen = []
    with recording_server() as url:
        yield url


def gateway_of(upstream: str, mapping: dict[str, tuple[str, str]], **options) -> GatewayThread:
    return GatewayThread(
        host="127.0.0.1", ports=[0], upstream=upstream, tenants=MappedTenants(mapping), **options
    )


def connect(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


def ask(port: int, request: bytes, source: str, timeout: float = 10) -> bytes:
    """Send `request` from `source`; the whole reply (b"" if the gateway closed without one)."""
    with connect(port, source) as sock:
        sock.settimeout(timeout)
        sock.sendall(request)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while data := sock.recv(65536):
                chunks.append(data)
    return b"".join(chunks)


def trickle(sock: socket.socket, piece: bytes, every: float, give_up: float) -> bytes:
    """Send `piece` every `every` s until the gateway answers or closes (its answer) or
    `give_up` s pass (b"")."""
    deadline = time.monotonic() + give_up
    chunks: list[bytes] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            sock.sendall(piece)
        if select.select([sock], [], [], every)[0]:
            with contextlib.suppress(ConnectionResetError):
                while data := sock.recv(65536):
                    chunks.append(data)
            return b"".join(chunks)
    return b""


def test_one_organizations_slow_bodies_cannot_starve_another_organizations_tasks_download(
    upstream,
):
    """The attack of issue 21: nine sandboxes of one organization (three runs of three) hold
    32 slow-body connections each, 288 against a gateway that once took 256 in all; another
    organization's run still downloads its Tasks file, and the attacker's next connection is
    answered 503 at once instead of waiting."""
    attackers = [f"127.0.0.{i}" for i in range(2, 11)]
    mapping = {address: (f"run_a{i // 3}", "org_a") for i, address in enumerate(attackers)}
    mapping["127.0.0.20"] = ("run_b", "org_b")
    running = gateway_of(upstream, mapping)
    slow_body = (
        b"POST /api/v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"{" * 10
    )

    def hold(address: str) -> socket.socket:
        sock = connect(running.port, address)
        sock.sendall(slow_body)
        return sock

    held: list[socket.socket] = []
    try:
        with ThreadPoolExecutor(16) as pool:
            held = list(pool.map(hold, [a for a in attackers for _ in range(32)]))
        wait_for(lambda: running.open_connections() == 128, 10, "org_a's share to fill")
        tasks = ask(running.port, TASKS, "127.0.0.20")
        again = ask(running.port, slow_body, attackers[0], timeout=5)
    finally:
        for sock in held:
            sock.close()
        running.stop()

    assert tasks.startswith(b"HTTP/1.1 200") or tasks.startswith(b"HTTP/1.0 200"), tasks[:200]
    assert tasks.endswith(b"data: [DONE]\n\n")
    assert again.startswith(b"HTTP/1.1 503 "), again[:200]
    assert b"\r\nRetry-After: " in again
    assert b"connections" in again


def test_a_run_and_an_organization_are_each_held_to_their_share(upstream):
    mapping = {
        "127.0.0.2": ("run_a", "org_a"),
        "127.0.0.3": ("run_a", "org_a"),  # run_a's second sandbox
        "127.0.0.4": ("run_c", "org_a"),
        "127.0.0.5": ("run_d", "org_b"),
    }
    limits = Limits(total=20, per_organization=5, per_run=3, per_address=10)
    running = gateway_of(upstream, mapping, limits=limits)
    held: list[socket.socket] = []
    try:
        for address in ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.4"]:
            held.append(connect(running.port, address))
            held[-1].sendall(b"GET /api/v1/models HTTP/1.1\r\n")  # a head not yet whole
        wait_for(lambda: running.open_connections() == 5, 10, "the gateway to hold five")
        run_full = ask(running.port, TASKS, "127.0.0.3")  # run_a holds 3
        organization_full = ask(running.port, TASKS, "127.0.0.4")  # org_a holds 5
        other = ask(running.port, TASKS, "127.0.0.5")
    finally:
        for sock in held:
            sock.close()
        running.stop()

    assert run_full.startswith(b"HTTP/1.1 503 ") and b"this run's sandboxes hold 3" in run_full
    assert organization_full.startswith(b"HTTP/1.1 503 ")
    assert b"this organization's sandboxes hold 5" in organization_full
    assert b" 200 " in other.split(b"\r\n", 1)[0]


def test_a_full_gateway_answers_503_with_retry_after_at_once(upstream):
    running = gateway_of(upstream, {}, limits=Limits(total=3))
    held: list[socket.socket] = []
    try:
        for i in range(3):
            held.append(connect(running.port, f"127.0.0.{2 + i}"))
            held[-1].sendall(b"GET /api/v1/models HTTP/1.1\r\n")
        wait_for(lambda: running.open_connections() == 3, 10, "the gateway to hold three")
        refused = ask(running.port, TASKS, "127.0.0.9", timeout=5)  # a wait would time out
        held.pop().close()
        wait_for(lambda: running.open_connections() == 2, 10, "a connection to end")
        served = ask(running.port, TASKS, "127.0.0.9")
    finally:
        for sock in held:
            sock.close()
        running.stop()

    assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), refused[:200]
    assert b"\r\nRetry-After: 5\r\n" in refused
    assert b"the gateway holds 3 connections" in refused
    assert b" 200 " in served.split(b"\r\n", 1)[0]


def test_a_request_head_trickling_past_its_deadline_is_answered_408(upstream):
    """Headers sent a line every half second, forever: a head must be whole within 10 s in
    all (the gateway once waited 30 s and then closed without a word)."""
    running = gateway_of(upstream, {})
    try:
        with connect(running.port, "127.0.0.2") as sock:
            sock.sendall(b"GET /api/v1/models HTTP/1.1\r\n")
            started = time.monotonic()
            reply = trickle(sock, b"X-Slow: 1\r\n", every=0.5, give_up=40)
            took = time.monotonic() - started
    finally:
        running.stop()

    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:200]
    assert b"no request head within 10 s" in reply
    assert took < 25  # well before the old 30 s
    assert Recorder.seen == []


def test_a_request_body_slower_than_the_minimum_rate_is_answered_408(upstream):
    """A body of 100 kB sent 5 bytes every half second (10 bytes/s, against 500 bytes/s after
    a 10 s grace): 408 and closed, where the gateway once waited up to 600 s on each read."""
    running = gateway_of(upstream, {})
    try:
        with connect(running.port, "127.0.0.2") as sock:
            sock.sendall(
                b"POST /api/v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
            )
            reply = trickle(sock, b"{" * 5, every=0.5, give_up=40)
        wait_for(lambda: running.open_connections() == 0, 10, "the connection to be closed")
    finally:
        running.stop()

    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:200]
    assert b"slower than 500 bytes/s" in reply


def test_a_body_at_a_fair_pace_is_forwarded_whole(upstream):
    """Pauses a slow sandbox can have (a body in pieces, a second apart) are no 408."""
    running = gateway_of(upstream, {}, limits=Limits(body_grace=0.5, body_min_rate=1000))
    body = b"x" * 4000
    try:
        with connect(running.port, "127.0.0.2") as sock:
            sock.sendall(b"POST /api/v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n")
            for i in range(0, 4000, 2000):
                sock.sendall(body[i : i + 2000])  # 2 s of credit each, sent 1 s apart
                time.sleep(1)
            reply = sock.recv(65536)
    finally:
        running.stop()

    assert b" 200 " in reply.split(b"\r\n", 1)[0], reply[:200]
    assert Recorder.seen[0]["body"] == body


class Flood(http.server.BaseHTTPRequestHandler):
    """A reply far larger than any socket buffer."""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(256 * 2**20))
        self.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(256):
                self.wfile.write(b"z" * 2**20)

    def log_message(self, *args):
        pass


def test_a_sandbox_that_stops_reading_its_reply_loses_the_connection():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    running = gateway_of(
        f"http://127.0.0.1:{server.server_address[1]}", {}, limits=Limits(send_timeout=1)
    )
    try:
        with connect(running.port, "127.0.0.2") as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(TASKS)  # and never reads
            wait_for(lambda: running.open_connections() == 1, 10, "the gateway to take it")
            wait_for(lambda: running.open_connections() == 0, 20, "the gateway to drop the reader")
    finally:
        running.stop()
        server.shutdown()
        server.server_close()


def test_the_command_takes_every_limit_from_its_setting(settings):
    from runs.management.commands.sandbox_gateway import limits

    settings.BELVEDIR_SANDBOX_GATEWAY_PER_ORGANIZATION = 7
    settings.BELVEDIR_SANDBOX_GATEWAY_BODY_MIN_RATE = 99

    taken = limits()

    assert taken == Limits(per_organization=7, body_min_rate=99)


FLOOD = """
import socket, sys, time
port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held, started = [], time.monotonic()
for i in range(count):
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind(("127.0.0.2", 0))
    sock.connect_ex(("127.0.0.1", port))
    held.append(sock)
    pause = started + seconds * (i + 1) / count - time.monotonic()
    if pause > 0:
        time.sleep(pause)
print("flooded", flush=True)
sys.stdin.read()  # every socket stays open until the test is done
"""


def open_sockets() -> int:
    """Sockets this process (the gateway's thread, its upstream, the test) holds now."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def timed_ask(port: int, source: str) -> tuple[bytes, float]:
    started = time.monotonic()
    reply = ask(port, TASKS, source, timeout=30)
    return reply, time.monotonic() - started


def test_a_flood_of_connects_from_one_sandbox_holds_no_more_sockets_than_its_caps(upstream, caplog):
    """The review's attack: one sandbox opens 2,000 connections in 2 s and sends nothing. The
    gateway once held every one it refused for up to 2 s (565-985 sockets, 32 counted), logged
    a warning or a traceback for each, and another tenant waited 9-20 s for its Tasks file.
    Now each counts from its accept: the 33rd and on are answered 503 or closed at once, the
    log says so a line per address per 10 s, and the other tenant is answered as before."""
    mapping = {"127.0.0.2": ("run_a", "org_a"), "127.0.0.3": ("run_b", "org_b")}
    limits = Limits()
    running = gateway_of(upstream, mapping, limits=limits)
    flooder = None
    try:
        before_reply, before = timed_ask(running.port, "127.0.0.3")
        baseline = open_sockets()
        caplog.set_level(logging.INFO, logger="sandboxes.gateway")
        caplog.clear()
        flooder = subprocess.Popen(
            [sys.executable, "-c", FLOOD, str(running.port), "2000", "2"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                samples.append(open_sockets())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        time.sleep(1)  # half way through the flood
        during_reply, during = timed_ask(running.port, "127.0.0.3")
        assert flooder.stdout.readline() == "flooded\n"
        time.sleep(0.5)  # the flood's last connections, each held at most `refuse_drain`
        done.set()
        sampler.join(5)
        held_at_end = open_sockets() - baseline
        counted = running.open_connections()
        logged = [r for r in caplog.records if r.name.startswith("sandboxes")]
    finally:
        if flooder is not None:
            flooder.stdin.close()
            flooder.wait(10)
        running.stop()

    for reply in (before_reply, during_reply):
        assert b" 200 " in reply.split(b"\r\n", 1)[0], reply[:200]
    assert during < before + 2, (before, during)
    cap = limits.per_address + 4  # the counted ones and a few 503s in flight
    assert counted == limits.per_address
    assert held_at_end <= cap + 4, (held_at_end, samples)
    assert max(samples) - baseline <= cap + 10, samples  # + this test's own request
    assert len(logged) <= 3, [r.getMessage() for r in logged[:5]]
    assert "more since the last line" in logged[-1].getMessage() or len(logged) == 1


class Stalled:
    """Tenants whose lookup waits until `released` (the Docker engine not answering)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    async def of(self, address: str) -> Tenant:
        while not self.released.is_set():
            await asyncio.sleep(0.02)
        return stranger(address)


def test_connections_waiting_on_a_stalled_lookup_count_against_their_address_and_the_total(
    upstream,
):
    """While the engine does not say whose an address is, its connections already hold their
    address's and the gateway's share (the gateway once counted none until the lookup ended,
    so a stalled listing let one address open any number)."""
    tenants = Stalled()
    running = GatewayThread(
        host="127.0.0.1",
        ports=[0],
        upstream=upstream,
        tenants=tenants,
        limits=Limits(per_address=4, total=6),
    )
    held: list[socket.socket] = []
    try:
        for address in ["127.0.0.2"] * 4 + ["127.0.0.3"] * 2:
            held.append(connect(running.port, address))
        wait_for(lambda: running.open_connections() == 6, 10, "the gateway to count six")
        address_full = ask(running.port, TASKS, "127.0.0.2", timeout=5)
        gateway_full = ask(running.port, TASKS, "127.0.0.4", timeout=5)
        tenants.released.set()
    finally:
        tenants.released.set()
        for sock in held:
            sock.close()
        running.stop()

    assert address_full.startswith(b"HTTP/1.1 503 "), address_full[:200]
    assert b"this sandbox holds 4 connections" in address_full
    assert gateway_full.startswith(b"HTTP/1.1 503 "), gateway_full[:200]
    assert b"the gateway holds 6 connections" in gateway_full
    assert Recorder.seen == []
