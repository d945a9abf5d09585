"""A local OpenAI- and Anthropic-compatible upstream on 127.0.0.1 for the router's tests and
bench: answers chat completions whole or streamed (usage in the last chunk when `stream_options.include_usage`
asks for it), slowly when told to, or with an error.

    with FakeUpstream(words=5) as fake:
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE = fake.base_url

What it answers is set on the object: `words` (the reply's length, one token each), `prompt_tokens` (the usage it
reports for the prompt), `delay`
(seconds before answering), `chunk_delay` (between streamed words), `fail` ((status, body) to
answer instead, with `fail_headers`: a redirect's Location), `usage_of` (a function of the
request's body giving the usage to report). Every request's JSON body is kept in `requests`,
its Authorization and Host headers and path in `seen` (what key reached the upstream, for which
name), all its headers (lower-cased) in `headers`.

The other APIs (`tests.router.fake_apis`) answer on their paths: completions, embeddings,
responses, Anthropic's messages and messages/count_tokens.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.router import fake_apis

PROMPT_TOKENS = 11


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # a hundred connections at once wait in the backlog, not refused


def reply_words(count: int) -> list[str]:
    return [f"w{i}" for i in range(count)]


class FakeUpstream:
    def __init__(
        self,
        *,
        words: int = 5,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        port: int = 0,
        host: str = "127.0.0.1",
    ):
        self.words, self.delay, self.chunk_delay = words, delay, chunk_delay
        self.prompt_tokens = PROMPT_TOKENS
        # When set: the usage it reports for a request body (instead of `prompt_tokens` and
        # the reply's words).
        self.usage_of = None
        self.fail: tuple[int, bytes] | None = None
        self.fail_headers: dict[str, str] = {}
        self.seen: list[dict[str, str]] = []
        self.headers: list[dict[str, str]] = []  # every request's headers, lower-cased
        self.requests: list[dict] = []
        self.disconnects = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else small writes wait on delayed ACKs (40 ms)

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "fake/model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fake.seen.append(
                        {
                            "authorization": self.headers.get("Authorization") or "",
                            "host": self.headers.get("Host") or "",
                            "path": self.path,
                        }
                    )
                if fake.delay:
                    time.sleep(fake.delay)
                if fake.fail is not None:
                    status, content = fake.fail
                    return self._send_bytes(status, content)
                path = self.path.split("?")[0]
                if not path.endswith("/chat/completions"):
                    return self._other(path, body)
                if body.get("stream"):
                    return self._stream(body)
                self._send(200, fake.completion(body))

            def _other(self, path: str, body: dict):
                words = reply_words(fake.words)
                usage = fake.usage(len(words), body)
                streamed = bool(body.get("stream"))
                if path.endswith("/messages/count_tokens"):
                    return self._send(200, fake_apis.count_tokens(body))
                if path.endswith("/embeddings"):
                    return self._send(200, fake_apis.embeddings(body, usage))
                name = path.rsplit("/", 1)[-1]
                if name == "completions":
                    if streamed:
                        events = fake_apis.completion_events(body, words, usage)
                        return self._events([(None, e) for e in events], done=True)
                    return self._send(200, fake_apis.completion(body, words, usage))
                if name == "responses":
                    if streamed:
                        return self._events(fake_apis.response_events(body, words, usage))
                    return self._send(200, fake_apis.response(body, words, usage))
                if name == "messages":
                    if streamed:
                        return self._events(fake.message_events(body, words, usage))
                    return self._send(200, fake.message(body, words, usage))
                self._send(404, {"error": {"message": f"no {path}", "type": "not_found"}})

            def _events(self, events, *, done: bool = False, paced: int | None = None):
                """Named (or, with None, unnamed) SSE events, chunked; `chunk_delay` after
                each of the first `paced` (all by default)."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for i, (name, event) in enumerate(events):
                        line = b"data: " + json.dumps(event).encode() + b"\n\n"
                        self._write((f"event: {name}\n".encode() if name else b"") + line)
                        if fake.chunk_delay and (paced is None or i < paced):
                            time.sleep(fake.chunk_delay)
                    if done:
                        self._write(b"data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    with fake._lock:
                        fake.disconnects += 1

            def _stream(self, body):
                words = reply_words(fake.words)
                events = []
                for i, word in enumerate(words):
                    delta = {"content": (" " if i else "") + word}
                    if i == 0:
                        delta["role"] = "assistant"
                    events.append((None, fake.chunk(body, delta, None)))
                events.append((None, fake.chunk(body, {}, "stop")))
                if (body.get("stream_options") or {}).get("include_usage"):
                    event = fake.chunk(body, None, None)
                    event["choices"] = []
                    event["usage"] = fake.usage(len(words), body)
                    events.append((None, event))
                self._events(events, done=True, paced=len(words))

            def _write(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _send(self, status: int, document: dict) -> None:
                self._send_bytes(status, json.dumps(document).encode())

            def _send_bytes(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in fake.fail_headers.items() if status != 200 else ():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server((host, port), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def usage(self, completion: int, body: dict) -> dict:
        if self.usage_of is not None:
            return self.usage_of(body)
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }

    def completion(self, body: dict) -> dict:
        words = reply_words(self.words)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1796000000,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": " ".join(words)},
                    "finish_reason": "stop",
                }
            ],
            "usage": self.usage(len(words), body),
        }

    def message(self, body: dict, words: list[str], usage: dict) -> dict:
        """Anthropic's Messages answer (a subclass may script it)."""
        return fake_apis.message(body, words, usage)

    def message_events(self, body: dict, words: list[str], usage: dict) -> list:
        """The same, as the named events of its stream."""
        return fake_apis.message_events(body, words, usage)

    def chunk(self, body: dict, delta: dict | None, finish: str | None) -> dict:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1796000000,
            "model": body.get("model"),
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        }

    def __enter__(self) -> "FakeUpstream":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    """`python -m tests.router.fake_upstream --port P --words N --chunk-delay S`: serve until
    killed (the router bench runs it in a process of its own)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--words", type=int, default=5)
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    args = parser.parse_args()
    fake = FakeUpstream(words=args.words, chunk_delay=args.chunk_delay, port=args.port)
    fake.server.serve_forever()


if __name__ == "__main__":
    main()
