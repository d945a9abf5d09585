"""The sandbox gateway: only sandbox-facing paths get through, bodies and replies stream."""

import contextlib
import http.client
import http.server
import json
import socket
import threading

import pytest

from sandboxes.gateway import GatewayThread, Limits, path_allowed
from tests.runs.helpers import wait_for


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/traces",
        "/api/v1/outcomes",
        "/api/v1/runs/run_abc123/tasks",
        "/api/v1/runs/run_abc123/tasks/export?limit=5",
        "/api/v1/chat/completions",
        "/api/v1/completions",
        "/api/v1/embeddings",
        "/api/v1/responses",
        "/api/v1/messages",
        "/api/v1/messages/count_tokens?beta=true",
        "/api/v1/models",
        "/api/v1/adapters/ad_1/download?sig=x",
        "/git/belvedir-runner.git/info/refs?service=git-upload-pack",
        "/git/harness-harbor.git/objects/pack/pack-1a2b.pack",
        "/api/v1/task-sandboxes",
        "/api/v1/task-sandboxes/tsb_abc",
        "/api/v1/task-sandboxes/tsb_abc/exec",
        "/api/v1/task-sandboxes/tsb_abc/files?path=/app/state",
        "/api/v1/runs/run_abc/task-sandboxes",
    ],
)
def test_sandbox_facing_paths_are_allowed(target):
    assert path_allowed(target)


@pytest.mark.parametrize(
    "target",
    [
        "/",
        "/admin/",
        "/api/v1/keys",
        "/api/v1/runs",
        "/api/v1/runs/run_abc/log",
        "/api/v1/runs/run_abc/cancel",
        "/api/v1/traces/../keys",
        "/api/v1/traces/%2e%2e/keys",
        "/api/v1/runs/%2e%2e/tasks",
        "/api/v1/runs/a%2Fb/tasks",
        "/api/v1/runs/%2e%2e/tasks/export",
        "/api/v1/runs/run_abc/tasks/export/more",
        "/git/../admin/",
        "/git/%2e%2e/admin/",
        "/git/acme/harness.git/info/refs?service=git-upload-pack",
        "/git/belvedir-runner.git/../../admin/",
        "//api/v1/traces",
        "http://127.0.0.1:5432/api/v1/traces",
        "127.0.0.1:6379",
        "/api/v1/traces%00",
        "/api/v1/tracesX",
        "/api/v1/task-sandboxes/tsb_abc/logs",
        "/api/v1/task-sandboxes/%2e%2e/keys",
        "/api/v1/messages/batches",
        "/api/v1/messages/%2e%2e/keys",
        "/api/v1/credits",
    ],
)
def test_every_other_path_is_refused(target):
    assert not path_allowed(target)


class Recorder(http.server.BaseHTTPRequestHandler):
    """A fake platform: records each request; answers with a first piece, then the rest only
    once `go_on` is set (a proxy that buffered whole replies would never show the first)."""

    seen: list[dict] = []
    go_on = threading.Event()
    first_bytes = threading.Event()

    def do_POST(self):  # noqa: N802
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.seen.append(
            {
                "path": self.path,
                "headers": dict(self.headers),
                "transfer_encodings": self.headers.get_all("Transfer-Encoding") or [],
                "body": body,
            }
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: one\n\n")
        self.wfile.flush()
        if self.path == "/api/v1/chat/completions":
            Recorder.go_on.wait(10)
        self.wfile.write(b"data: two\n\ndata: [DONE]\n\n")

    do_GET = do_POST

    def do_PUT(self):  # noqa: N802
        """Reads the first KiB, says so, then the rest: a gateway that buffered whole request
        bodies would never forward the first KiB before the client sent the rest."""
        size = int(self.headers["Content-Length"])
        first = self.rfile.read(1024)
        Recorder.first_bytes.set()
        body = first + self.rfile.read(size - len(first))
        Recorder.seen.append(
            {
                "path": self.path,
                "headers": dict(self.headers),
                "transfer_encodings": self.headers.get_all("Transfer-Encoding") or [],
                "body": body,
            }
        )
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


class Platform(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # as many connections at once as the gateway may forward
    daemon_threads = True


@contextlib.contextmanager
def recording_server():
    """A Recorder on a free port; its URL."""
    server = Platform(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def upstream():
    Recorder.seen = []
    Recorder.go_on.clear()
    Recorder.first_bytes.clear()
    with recording_server() as url:
        yield url


@pytest.fixture
def gateway(upstream):
    running = GatewayThread(host="127.0.0.1", ports=[0], upstream=upstream)
    yield running.port
    running.stop()


def raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def test_an_allowed_request_reaches_the_platform_with_its_body_and_no_forged_forwarding(
    gateway,
):
    body = json.dumps({"session_id": "s", "outcome": "success"}).encode()
    reply = raw(
        gateway,
        b"POST /api/v1/outcomes HTTP/1.1\r\nHost: 172.30.0.1:18700\r\n"
        b"Authorization: Bearer bv_run_x\r\nX-Forwarded-For: 10.9.9.9\r\nForwarded: for=1.2.3.4\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body,
    )

    assert reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200")
    (seen,) = Recorder.seen
    assert seen["path"] == "/api/v1/outcomes"
    assert seen["body"] == body
    assert seen["headers"]["Authorization"] == "Bearer bv_run_x"
    assert seen["headers"]["X-Forwarded-For"] == "127.0.0.1"
    assert seen["headers"]["X-Forwarded-Host"] == "172.30.0.1:18700"
    assert seen["headers"]["Host"].startswith("127.0.0.1:")
    assert "Forwarded" not in seen["headers"]


def test_a_chunked_body_is_forwarded_whole(gateway):
    reply = raw(
        gateway,
        b"POST /api/v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
    )

    assert b" 200 " in reply.split(b"\r\n", 1)[0]
    assert Recorder.seen[0]["body"] == b"hello world"
    # Once: a second Transfer-Encoding header makes uvicorn refuse the request.
    assert Recorder.seen[0]["transfer_encodings"] == ["chunked"]


def test_a_refused_path_is_a_404_and_never_reaches_the_platform(gateway):
    reply = raw(gateway, b"GET /admin/ HTTP/1.1\r\nHost: x\r\n\r\n")

    assert reply.startswith(b"HTTP/1.1 404 Not Found")
    assert b"not available to sandboxes" in reply
    assert Recorder.seen == []


@pytest.mark.parametrize(
    "head",
    [
        b"POST /api/v1/traces HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /api/v1/traces HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"POST /api/v1/traces HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"GET /api/v1/traces HTTP/1.1\r\nHost: x\r\n folded: header\r\n\r\n",
        b"GET /api/v1/traces HTTP/2.0\r\n\r\n",
        b"GARBAGE\r\n\r\n",
    ],
)
def test_an_ambiguous_or_malformed_request_is_refused_before_the_platform(gateway, head):
    reply = raw(gateway, head)

    assert reply.split(b" ")[1] in (b"400", b"501")
    assert Recorder.seen == []


@pytest.mark.parametrize(
    "head",
    [
        b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n"
        b"X-A: a\nX-Forwarded-For: 6.6.6.6\nHost: evil.example\r\n\r\n",  # bare LF
        b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\rX-Injected: 1\r\n\r\n",  # bare CR
        b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
        b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\x1bb\r\n\r\n",
        b"GET /api/v1/models HTTP/1.1\nHost: x\r\n\r\n",  # bare LF after the request line
    ],
)
def test_a_control_character_in_the_request_head_is_a_400_and_never_reaches_the_platform(
    gateway, head
):
    """A bare LF in a header value was forwarded as it came: to a lenient upstream (nginx)
    `X-A: a\nX-Forwarded-For: 6.6.6.6` is two headers, the second forged."""
    reply = raw(gateway, head)

    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n"), reply[:200]
    assert b"control character" in reply
    assert Recorder.seen == []


def test_a_tab_in_a_header_value_is_forwarded(gateway):
    reply = raw(gateway, b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-A: a\tb\r\n\r\n")

    assert b" 200 " in reply.split(b"\r\n", 1)[0], reply[:200]
    assert Recorder.seen[0]["headers"]["X-A"] == "a\tb"


def test_an_oversized_request_head_is_refused(gateway):
    reply = raw(gateway, b"GET /api/v1/traces HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")

    assert reply.startswith(b"HTTP/1.1 431")


def test_a_streamed_reply_arrives_piece_by_piece(gateway):
    conn = http.client.HTTPConnection("127.0.0.1", gateway, timeout=5)
    conn.request("POST", "/api/v1/chat/completions", body=b"{}")
    response = conn.getresponse()
    first = response.fp.readline()  # times out if the gateway waits for the whole reply
    Recorder.go_on.set()
    rest = response.read()

    assert first == b"data: one\n"
    assert rest.endswith(b"data: [DONE]\n\n")


def test_a_request_body_is_forwarded_as_it_arrives(gateway):
    """A task sandbox upload (a tar of any size) is streamed, never held whole."""
    body = bytes(range(256)) * 4096  # 1 MiB
    with socket.create_connection(("127.0.0.1", gateway), timeout=10) as sock:
        sock.sendall(
            b"PUT /api/v1/task-sandboxes/tsb_x/files?path=/app HTTP/1.1\r\nHost: x\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:4096]
        )
        reached = Recorder.first_bytes.wait(10)  # before the rest of the body was sent
        sock.sendall(body[4096:])
        reply = sock.recv(65536)

    assert reached
    assert b" 204 " in reply.split(b"\r\n", 1)[0]
    assert Recorder.seen[0]["body"] == body


def test_an_unreachable_platform_is_a_502(upstream):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    running = GatewayThread(host="127.0.0.1", ports=[0], upstream=f"http://127.0.0.1:{closed}")
    try:
        reply = raw(running.port, b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        running.stop()

    assert reply.startswith(b"HTTP/1.1 502")


def test_one_sandbox_holding_connections_open_cannot_take_every_slot(upstream):
    running = GatewayThread(
        host="127.0.0.1", ports=[0], upstream=upstream, limits=Limits(per_address=2)
    )
    try:
        idle = [socket.create_connection(("127.0.0.1", running.port)) for _ in range(2)]
        for sock in idle:  # wait until the gateway holds both (each waits for its head)
            sock.sendall(b"GET /api/v1/models HTTP/1.1\r\n")
        wait_for(lambda: running.open_connections() == 2, 10, "the gateway to hold both")
        refused = raw(running.port, b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.pop().close()
        wait_for(
            lambda: b" 200 " in raw(running.port, b"GET /api/v1/models HTTP/1.1\r\n\r\n")[:20],
            10,
            "a slot to come free",
        )
        for sock in idle:
            sock.close()
    finally:
        running.stop()

    assert refused.startswith(b"HTTP/1.1 503 ")
    assert b"Retry-After: " in refused
    assert Recorder.seen and all(seen["path"] == "/api/v1/models" for seen in Recorder.seen)


def test_task_sandbox_paths_go_to_the_task_upstream_and_the_rest_to_the_upstream(upstream):
    """A worker host's gateway: the platform behind the load balancer for everything, but the
    task-sandbox paths to a platform process on this host's own engine (docs/scaling.md)."""
    with recording_server() as task_upstream:
        running = GatewayThread(
            host="127.0.0.1", ports=[0], upstream=upstream, task_upstream=task_upstream
        )
        try:
            for target in [
                "/api/v1/task-sandboxes",
                "/api/v1/task-sandboxes/tsb_a/exec",
                "/api/v1/task-sandboxes/tsb_a/files?path=/app",
                "/api/v1/runs/run_a/task-sandboxes",
                "/api/v1/traces",
                "/api/v1/runs/run_a/tasks",
            ]:
                head = f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                assert b" 200 " in raw(running.port, head).split(b"\r\n", 1)[0], target
        finally:
            running.stop()

    reached = {seen["path"]: "http://" + seen["headers"]["Host"] for seen in Recorder.seen}
    assert reached == {
        "/api/v1/task-sandboxes": task_upstream,
        "/api/v1/task-sandboxes/tsb_a/exec": task_upstream,
        "/api/v1/task-sandboxes/tsb_a/files?path=/app": task_upstream,
        "/api/v1/runs/run_a/task-sandboxes": task_upstream,
        "/api/v1/traces": upstream,
        "/api/v1/runs/run_a/tasks": upstream,
    }


def test_the_gateway_waits_longer_than_a_task_sandbox_image_build(settings):
    """A task sandbox's create answers once its image is built (up to the build's time cap):
    the gateway must not drop it as idle before then."""
    from runs.management.commands.sandbox_gateway import default_timeout

    settings.BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT = 1800
    assert default_timeout() > 1800
    settings.BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT = 60
    assert default_timeout() == 600
