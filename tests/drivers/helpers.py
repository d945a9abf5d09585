"""Import the drivers shipped in drivers/ (standalone programs, not platform packages), a
scripted OpenAI-compatible server (the model answers and the judge scores as a test says), and
the platform's Harbor export as a driver fetches it."""

import io
import json
import re
import socket
import sys
import threading
import zipfile
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DRIVERS = Path(__file__).resolve().parents[2] / "drivers"
RUNNER = DRIVERS / "belvedir-runner"
HARBOR = DRIVERS / "harness-harbor"
for _path in (RUNNER, HARBOR):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# What the scripted judge gives each candidate answer.
VERDICTS = {"good": 1.0, "half": 0.6, "bad": 0.2}


class Served:
    """A local HTTP server (`self.server`) serving in a thread of its own while the block runs."""

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class ScriptedLLM(Served):
    """POST /v1/chat/completions. As the model (any model but `judge`), it answers the n-th
    call for a prompt with scripts[prompt][n % len]; as the judge (model `judge`), it scores
    the candidate by the word it holds (VERDICTS). `fail_first` answers the first calls with
    that status (429, 503) to exercise retries. Every request is kept."""

    def __init__(self, scripts: dict[str, list[str]] | None = None, host="127.0.0.1", port=0):
        self.scripts = scripts or {}
        self.fail_first: list[int] = []
        self.requests: list[dict] = []
        self.calls: Counter = Counter()
        self._lock = threading.Lock()
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"null")
                with llm._lock:
                    llm.requests.append({"headers": dict(self.headers), "body": body})
                    status = llm.fail_first.pop(0) if llm.fail_first else 200
                if status != 200:
                    return self._send(status, {"error": {"message": "try later"}})
                self._send(200, llm.completion(body))

            def _send(self, status, document):
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True

    def completion(self, body: dict) -> dict:
        messages = body["messages"]
        if body["model"] == "judge":
            candidate = messages[-1]["content"].rsplit("## Candidate answer", 1)[-1]
            word = next((w for w in VERDICTS if re.search(rf"\b{w}\b", candidate)), "bad")
            reply = json.dumps({"score": VERDICTS[word], "reason": f"the answer is {word}"})
        else:
            prompt = messages[-1]["content"]
            with self._lock:
                number = self.calls[prompt]
                self.calls[prompt] += 1
            script = self.scripts.get(prompt, ["good"])
            reply = script[number % len(script)]
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def model_calls(self) -> list[dict]:
        return [r for r in self.requests if r["body"]["model"] != "judge"]


# Three tasks whose attempts the scripted servers grade (threshold 0.5):
#   judge:  good bad bad   → scores 1 .2 .2 → pass@1 1/3, pass@k 1, mean .4667
#   rubric: half half bad  → .6 .6 .2       → pass@1 2/3, pass@k 1, mean .4667
#   plain:  bad bad bad    → .2 .2 .2       → pass@1 0,   pass@k 0, mean .2
TASKS_TEXT = "\n".join(
    [
        json.dumps({"id": "capital", "prompt": "Capital of France?", "answer": "Paris"}),
        json.dumps(
            {
                "id": "refund",
                "prompt": "A refund after 40 days?",
                "verifier": {"kind": "rubric", "criteria": ["Cites 30 days", "Offers credit"]},
                "metadata": {"topic": "billing"},
            }
        ),
        json.dumps({"prompt": "Write a haiku about rain."}),
    ]
)
SCRIPTS = {
    "Capital of France?": ["good", "bad", "bad"],
    "A refund after 40 days?": ["half", "half", "bad"],
    "Write a haiku about rain.": ["bad"],
}
EXPECTED = {
    "pass@1": (1 / 3 + 2 / 3 + 0) / 3,
    "pass@k": 2 / 3,
    "mean": ((1 + 0.2 + 0.2) / 3 + (0.6 + 0.6 + 0.2) / 3 + 0.2) / 3,
}


class AgentService:
    """A production agent as a service: answers each task posted as JSON with `answer(body)`,
    when the bearer token is AGENT_TOKEN; every post is kept."""

    def __init__(self, answer, host: str = "127.0.0.1", port: int = 0):
        self.posts: list[dict] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                service.posts.append({"auth": self.headers.get("Authorization"), "body": body})
                if self.headers.get("Authorization") != f"Bearer {AGENT_TOKEN}":
                    status, reply = 401, {"error": "bad token"}
                else:
                    status, reply = 200, {"answer": answer(body), "usage": {"prompt_tokens": 7}}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/agent"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


AGENT_TOKEN = "agent-token-e2e"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ExportServer(Served):
    """GET /api/v1/environments/{id}/export as the platform answers it: a zip of one folder."""

    def __init__(self, files: dict[str, str]):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, text in files.items():
                archive.writestr(f"Env-v1/{name}", text)
        self.zip = buffer.getvalue()
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Authorization")))
                ok = self.path.startswith(
                    ("/api/v1/environments/env_1/export", "/api/v1/runs/run_1/tasks/export")
                )
                self.send_response(200 if ok else 404)
                body = server.zip if ok else b'{"detail": "Not found."}'
                self.send_header("Content-Length", str(len(body)))
                if ok:
                    self.send_header("X-Belvedir-Tasks-Total", "7")
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
