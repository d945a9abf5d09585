"""The Belvedir Harbor environment's stops (belvedir_harbor/stops.py): a trial's stop asks the
platform and returns; a create waits until every stop asked before it is answered (the run's
HARBOR_CONCURRENCY holds); Harbor's process, at its end, waits only until each stop has reached
the platform, not for the answers (the platform stops a run's task sandboxes when it ends,
harbor/hooks.py), and never longer than STOP_REACH_S for a platform that does not take it."""

import logging
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.drivers.helpers import HARBOR, Served

from belvedir_harbor import stops  # isort: skip
from belvedir_harbor.platform import TaskSandboxes  # isort: skip

SANDBOX = b'{"id": "tsb_1", "status": "stopped"}'


class HeldStops(Served):
    """DELETE /api/v1/task-sandboxes/<id>: kept, then answered only once `release` is set."""

    def __init__(self):
        self.asked: list[str] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()
        held = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_DELETE(self):
                held.asked.append(self.path)
                held.arrived.set()
                held.release.wait(60)
                self.send_response(200)
                self.send_header("Content-Length", str(len(SANDBOX)))
                self.end_headers()
                self.wfile.write(SANDBOX)
                held.answered.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def held():
    with HeldStops() as server:
        yield server
        server.release.set()


def test_a_create_waits_until_the_stops_asked_before_it_are_answered(held):
    asked = stops.Stops()
    asked.start(TaskSandboxes(held.url, "key").stop, "tsb_1", logging.getLogger("t"))
    assert held.arrived.wait(10)
    waiting = threading.Thread(target=asked.wait, daemon=True)
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive(), "a create went ahead of a stop the platform had not answered"
    held.release.set()
    waiting.join(10)
    assert not waiting.is_alive() and held.answered.is_set()


EXITS = """
import logging, sys
sys.path.insert(0, {harbor!r})
from belvedir_harbor import stops
from belvedir_harbor.platform import TaskSandboxes
stops.STOP_REACH_S = {reach}
stops.STOPS.start(TaskSandboxes({url!r}, "key").stop, "tsb_1", logging.getLogger("t"))
print("asked", flush=True)
"""


def _exits(url: str, reach: float = 30) -> subprocess.Popen:
    script = EXITS.format(harbor=str(HARBOR), url=url, reach=reach)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def test_harbors_process_ends_once_its_stop_reached_the_platform_not_answered(held):
    process = _exits(held.url)
    try:
        code = process.wait(timeout=30)  # the answer is held for 60 s
    finally:
        process.kill()
    assert code == 0 and process.stdout.read() == "asked\n"
    assert held.asked == ["/api/v1/task-sandboxes/tsb_1"], "the stop never reached the platform"
    assert not held.answered.is_set()  # it ended while the platform still held the answer


def test_a_platform_that_never_takes_the_stop_holds_the_end_no_longer_than_its_bound():
    # A listening socket that never accepts, its backlog filled: the stop's connection is never
    # made (the kernel drops its SYNs), the request never sent.
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(0)
        port = listening.getsockname()[1]
        fillers = [socket.create_connection(("127.0.0.1", port), timeout=5)]
        process = _exits(f"http://127.0.0.1:{port}", reach=1)
        try:
            code = process.wait(timeout=60)  # READ_TIMEOUT is 120 s: the bound ends it first
        finally:
            process.kill()
            for filler in fillers:
                filler.close()
    assert code == 0
