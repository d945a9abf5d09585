"""A hostile model base on 127.0.0.1: answers every POST with `status` and a body of `total`
bytes of `fill` with no Content-Length (the connection's end ends it), written `chunk` bytes
at a time with `pause` seconds between; `sent` counts what it wrote before the caller
stopped reading.

    with HostileBase(total=100 * 2**20) as base:   # 100 MB of one endless line
        ... base.base_url ...
    with HostileBase(total=60, chunk=1, pause=1.0) as base:  # a byte a second
"""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class HostileBase:
    def __init__(
        self,
        *,
        total: int,
        status: int = 200,
        chunk: int = 64 * 2**10,
        pause: float = 0.0,
        fill: bytes = b"x",
        content_type: str = "application/json",
    ):
        self.sent = 0
        self.stopped = threading.Event()
        base = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends with the connection

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.end_headers()
                piece = (fill * (chunk // len(fill) + 1))[:chunk]
                written = 0
                try:
                    while written < total and not base.stopped.is_set():
                        size = min(chunk, total - written)
                        self.wfile.write(piece[:size])
                        self.wfile.flush()
                        written += size
                        base.sent = written
                        if pause:
                            base.stopped.wait(pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "HostileBase":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()
