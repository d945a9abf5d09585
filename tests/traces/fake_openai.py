"""A small OpenAI-compatible chat server on 127.0.0.1, for tests that cannot reach a provider.

    with FakeOpenAI(reply="The answer is 4.") as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="anything")

``POST /v1/chat/completions`` answers every (non-streamed) request with the same reply, the
requested model and deterministic usage (:func:`usage_for`); every request is kept in
``fake.requests`` (path, headers, JSON body) so a test can see what the harness sent.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_REPLY = "The answer is 4."


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def usage_for(messages: list[dict], reply: str) -> dict:
    prompt = sum(count_tokens(str(m.get("content") or "")) + 3 for m in messages)
    completion = count_tokens(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class FakeOpenAI:
    def __init__(self, reply: str = DEFAULT_REPLY, host: str = "127.0.0.1", port: int = 0):
        self.reply = reply
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                with fake._lock:
                    fake.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(
                        404,
                        {
                            "error": {
                                "message": f"no route {self.path}",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": "messages is required",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                if body.get("stream"):
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": "this fake does not stream",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                with fake._lock:
                    number = len(fake.requests)
                self._send(200, fake.completion(body, number))

            def _send(self, status: int, document: dict) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(
            target=self.server.serve_forever, daemon=True, name="fake-openai"
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as base_url (and a harness as MODEL_API_BASE)."""
        return f"{self.url}/v1"

    def completion(self, body: dict, number: int) -> dict:
        return {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": 1796000000,
            "model": str(body.get("model") or "fake-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.reply},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": usage_for(body["messages"], self.reply),
        }

    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["path"].rstrip("/") == "/v1/chat/completions"]

    def start(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def assert_spans_answer(llm: list, calls: list[dict], reply: str, model: str = "gpt-4o-mini"):
    """Each LLM span as stored holds its call's model, messages (a system prompt "Answer
    briefly." then the user's) and this server's token counts, in call order."""
    for s, call in zip(llm, calls, strict=True):
        usage = usage_for(call["body"]["messages"], reply)
        assert s.model == model
        assert s.output_messages == [{"role": "assistant", "content": reply}]
        assert s.input_messages[0] == {"role": "system", "content": "Answer briefly."}
        assert s.input_messages[1]["role"] == "user"
        assert (s.input_tokens, s.output_tokens, s.total_tokens) == (
            usage["prompt_tokens"],
            usage["completion_tokens"],
            usage["total_tokens"],
        )
        assert s.duration_ms > 0
