"""The Harbor driver's task-sandbox client (belvedir_harbor.platform) on the answers the
platform gives that the end-to-end runs rarely see: a run at its task-sandbox limit (429 with
Retry-After) is waited out, a failed build names the field, an exec stream that loses its
sandbox is an error, and a missing path is a 404 naming it."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.drivers.helpers import Served  # (puts the drivers on sys.path)

from belvedir_harbor.platform import PlatformError, TaskSandboxes  # isort: skip

SANDBOX = {"id": "tsb_1", "status": "running", "image": "belvedir-task:ab"}


class Platform(Served):
    """Answers queued per path: (status, headers, body bytes); every request is kept."""

    def __init__(self):
        self.answers: dict[str, list[tuple[int, dict, bytes]]] = {}
        self.requests: list[tuple[str, str, dict, bytes]] = []
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                platform.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, data = platform.answers[self.path.split("?")[0]].pop(0)
                self.send_response(status)
                for key, value in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def queue(self, path: str, status: int, body, headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.answers.setdefault(path, []).append((status, headers or {}, data))


@pytest.fixture
def platform():
    with Platform() as server:
        yield server


def test_a_run_at_its_limit_waits_as_told_then_starts(platform, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM belvedir-sandbox:latest\n")
    busy = {"detail": "The run already has 2 task sandboxes running", "code": "concurrency"}
    platform.queue("/api/v1/task-sandboxes", 429, busy, {"Retry-After": "3"})
    platform.queue("/api/v1/task-sandboxes", 429, busy, {"Retry-After": "3"})
    platform.queue("/api/v1/task-sandboxes", 201, SANDBOX)
    waits = []
    client = TaskSandboxes(platform.url, "bv_run_key")
    assert client.create("hello-world__abc", tmp_path, wait=waits.append) == SANDBOX
    assert waits == [3.0, 3.0]
    method, _, headers, body = platform.requests[-1]
    assert method == "POST" and headers["Authorization"] == "Bearer bv_run_key"
    assert headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert b'name="name"\r\n\r\nhello-world__abc\r\n' in body
    assert b'name="context"; filename="context.tar.gz"' in body


def test_a_failed_build_names_the_field_and_is_not_retried(platform, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM nowhere:latest\n")
    platform.queue("/api/v1/task-sandboxes", 400, {"context": ["The build failed: no image"]})
    with pytest.raises(PlatformError, match="HTTP 400: context: The build failed") as caught:
        TaskSandboxes(platform.url, "k").create("t", tmp_path, wait=pytest.fail)
    assert caught.value.status == 400 and caught.value.code == "context"


def test_exec_streams_the_output_and_a_lost_sandbox_is_an_error(platform):
    lines = [
        {"stream": "stdout", "data": "hel"},
        {"heartbeat": True},
        {"stream": "stderr", "data": "warn\n"},
        {"stream": "stdout", "data": "lo\n"},
        {"exit_code": 3, "timed_out": False},
    ]
    stream = "".join(json.dumps(line) + "\n" for line in lines).encode()
    platform.queue("/api/v1/task-sandboxes/tsb_1/exec", 200, stream)
    seen = []
    client = TaskSandboxes(platform.url, "k")
    outcome = client.exec(
        "tsb_1", "echo", cwd="/app", env={"A": "1"}, on_output=lambda d, s: seen.append((s, d))
    )
    assert (outcome.exit_code, outcome.stdout, outcome.stderr) == (3, "hello\n", "warn\n")
    assert seen == [("stdout", "hel"), ("stderr", "warn\n"), ("stdout", "lo\n")]
    sent = json.loads(platform.requests[-1][3])
    assert sent == {"command": "echo", "env": {"A": "1"}, "cwd": "/app"}

    lost = b'{"stream": "stdout", "data": "x"}\n{"error": "the task sandbox was removed"}\n'
    platform.queue("/api/v1/task-sandboxes/tsb_1/exec", 200, lost)
    with pytest.raises(PlatformError, match="the task sandbox was removed"):
        client.exec("tsb_1", "sleep 100")


def test_a_missing_path_and_a_revoked_key_say_so(platform, tmp_path):
    missing = {"detail": "/logs/agent does not exist in the task sandbox."}
    platform.queue("/api/v1/task-sandboxes/tsb_1/files", 404, missing)
    client = TaskSandboxes(platform.url, "k")
    with pytest.raises(PlatformError, match="HTTP 404: /logs/agent does not exist"):
        client.download("tsb_1", "/logs/agent", tmp_path / "agent", as_dir=True)
    assert platform.requests[-1][1] == "/api/v1/task-sandboxes/tsb_1/files?path=%2Flogs%2Fagent"
    platform.queue("/api/v1/task-sandboxes/tsb_1", 401, {"detail": "Unknown or revoked API key."})
    with pytest.raises(PlatformError, match="the run's key was refused .* has the run ended"):
        client.stop("tsb_1")
    with pytest.raises(PlatformError, match="must be absolute"):
        client.download("tsb_1", "logs", tmp_path, as_dir=True)
    with pytest.raises(PlatformError, match="BELVEDIR_BASE_URL is not set"):
        TaskSandboxes("", "k")
