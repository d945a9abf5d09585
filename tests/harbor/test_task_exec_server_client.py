"""The platform's side of a task sandbox's exec server (sandboxes/taskd.py) against a server
that lies: the task runs as root beside its server and may answer in its place, so every
bound is this side's. A local fake server stands in for the container's; no engine."""

import contextlib
import secrets
import socket
import threading
import time

import pytest
import requests

from sandboxes import taskd, taskexec

TOKEN = "t" * 64


class Lying:
    """A server on 127.0.0.1 that proves it holds TOKEN (or, with `token` another, tries to),
    checks the platform's proof, reads one request and answers with `reply(conn)`."""

    def __init__(self, reply, token: str = TOKEN):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[bytes] = []
        self.heard = bytearray()  # everything the platform sent an impostor past its hello
        self.hung_up = threading.Event()
        self.reply, self.token = reply, token
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                hello = conn.recv(20, socket.MSG_WAITALL)
                nonce = secrets.token_bytes(16)
                conn.sendall(nonce + taskd.proof(self.token, b"server", hello[4:], nonce))
                if self.token != TOKEN:
                    conn.settimeout(5)
                    with contextlib.suppress(OSError):
                        while got := conn.recv(65536):
                            self.heard.extend(got)
                    self.hung_up.set()
                    continue
                head = conn.recv(36, socket.MSG_WAITALL)
                if hello[:4] != b"BTD2" or head[:32] != taskd.proof(
                    TOKEN, b"client", nonce, hello[4:]
                ):
                    continue  # as taskd.c: a platform that cannot prove it gets nothing
                body = conn.recv(int.from_bytes(head[32:], "big"), socket.MSG_WAITALL)
                self.requests.append(body)
                try:
                    self.reply(conn)
                    conn.settimeout(30)
                    if conn.recv(1) == b"":
                        self.hung_up.set()
                except OSError:
                    self.hung_up.set()


def frame(kind: bytes, payload: bytes) -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


class NoEngine:
    """A docker client whose every exec is counted: the engine's path, when it is taken."""

    def __init__(self):
        self.execs: list[list[str]] = []
        self.api = self

    def exec_create(self, container, cmd, **kwargs):
        self.execs.append(list(cmd))
        raise requests.ConnectionError("no engine here")


@pytest.fixture
def serve(monkeypatch):
    servers = []

    def start(reply, token: str = TOKEN) -> tuple[Lying, NoEngine]:
        server = Lying(reply, token)
        servers.append(server)
        monkeypatch.setattr(taskd, "PORT", server.port)
        taskd._remember("c1", taskd.Where("127.0.0.1", TOKEN))
        return server, NoEngine()

    yield start
    for server in servers:
        server.listener.close()
    taskd._WHERE.pop("c1", None)


def events(engine, timeout=30.0, **fields) -> list[dict]:
    run = dict(command="true", cwd=None, env={}, timeout=timeout, user="") | fields
    return list(taskexec.exec_events(engine, "c1", **run))


def test_a_frame_over_the_bound_ends_the_command_with_an_error_and_is_never_read(serve):
    server, engine = serve(lambda conn: conn.sendall(b"o" + (2**31).to_bytes(4, "big")))
    got = events(engine)
    assert got[-1]["error"].startswith("the task sandbox's exec server broke the protocol")
    assert "2147483648 bytes" in got[-1]["error"]
    assert engine.execs == []  # not run again by the engine: it may have run
    assert server.hung_up.wait(5)


@pytest.mark.parametrize("code", [b"256", b"-1", b"1e3", b"", b"0137"])
def test_an_exit_code_the_engine_could_not_give_is_an_error(serve, code):
    _, engine = serve(lambda conn: conn.sendall(frame(b"x", code)))
    assert "broke the protocol" in events(engine)[-1]["error"]


def test_a_server_that_hangs_up_before_the_exit_is_an_error_not_a_second_run(serve):
    def half(conn):
        conn.sendall(frame(b"o", b"half"))
        conn.shutdown(socket.SHUT_WR)

    _, engine = serve(half)
    got = events(engine)
    assert got[0] == {"stream": "stdout", "data": "half"}
    assert got[-1]["error"].endswith("the exec server hung up")
    assert engine.execs == []


def test_a_server_that_hangs_up_on_the_request_is_an_error_and_nothing_is_run_again(serve):
    _, engine = serve(lambda conn: conn.shutdown(socket.SHUT_RDWR))
    assert events(engine)[-1]["error"].endswith("the exec server hung up")
    assert engine.execs == []


def test_a_server_that_cannot_prove_the_token_is_told_nothing(serve):
    """What holds a container's old address (another tenant's container, once it is gone)
    gets the nonce and nothing else: not the command, its env or the token; the engine then
    runs the command in the container it names, once."""
    impostor, engine = serve(lambda conn: None, token="u" * 64)

    got = events(engine, command="echo secret", env={"API_KEY": "sk-secret"})

    assert impostor.hung_up.wait(10)
    assert bytes(impostor.heard) == b""
    assert impostor.requests == []
    assert len(engine.execs) == 1 and got[-1]["error"].startswith("could not start")
    assert "c1" not in taskd._WHERE  # asked of the engine again next time


def test_an_empty_output_frame_is_a_protocol_error(serve):
    _, engine = serve(lambda conn: conn.sendall(frame(b"o", b"") * 1000 + frame(b"x", b"0")))
    assert "an empty output frame" in events(engine)[-1]["error"]


def test_a_decline_after_a_heartbeat_is_an_error_not_a_second_run(serve, monkeypatch):
    monkeypatch.setattr(taskd, "HEARTBEAT_SECONDS", 0.2)

    def late(conn):
        time.sleep(0.5)
        conn.sendall(frame(b"f", b"too late"))

    _, engine = serve(late)
    got = events(engine)
    assert {"heartbeat": True} in got
    assert "broke the protocol" in got[-1]["error"]
    assert engine.execs == []


def test_a_decline_after_output_is_an_error_not_a_second_run(serve):
    _, engine = serve(lambda conn: conn.sendall(frame(b"o", b"ran") + frame(b"f", b"no")))
    assert "broke the protocol" in events(engine)[-1]["error"]
    assert engine.execs == []


def test_a_decline_before_anything_ran_goes_to_the_engine_once(serve):
    _, engine = serve(lambda conn: conn.sendall(frame(b"f", b"the user is not in the image")))
    got = events(engine, user="nosuch")
    assert len(engine.execs) == 1
    assert got[-1]["error"].startswith("could not start the command")


def test_a_server_that_never_answers_is_ended_at_the_platforms_deadline(serve, monkeypatch):
    monkeypatch.setattr(taskd, "GRACE_SECONDS", 0.5)
    monkeypatch.setattr(taskd, "HEARTBEAT_SECONDS", 0.2)
    server, engine = serve(lambda conn: time.sleep(0))
    begin = time.monotonic()
    got = events(engine, timeout=1.0)
    assert got[-1] == {"exit_code": -1, "timed_out": True}
    assert {"heartbeat": True} in got
    assert time.monotonic() - begin < 3
    assert server.hung_up.wait(5)  # the connection closed: the real server kills the command


def test_endless_output_is_read_a_frame_at_a_time_and_closing_hangs_up(serve):
    chunk = frame(b"o", b"y" * taskd.FRAME_MAX)
    sent = []

    def flood(conn):
        while True:
            conn.sendall(chunk)
            sent.append(1)

    server, engine = serve(flood)
    stream = taskexec.exec_events(engine, "c1", command="yes", cwd=None, env={}, timeout=60)
    for _ in range(3):
        assert len(next(stream)["data"]) == taskd.FRAME_MAX
    time.sleep(1)
    held = len(sent)
    time.sleep(1)
    assert len(sent) == held  # the server is held back by the socket, not read ahead
    stream.close()
    assert server.hung_up.wait(5)


def test_a_nul_in_the_command_is_never_sent_to_the_server(serve):
    server, engine = serve(lambda conn: conn.sendall(frame(b"x", b"0")))
    events(engine, command="echo a\0b")
    assert server.requests == []
    assert len(engine.execs) == 1


def test_the_request_carries_the_user_cwd_argv_and_env_as_fields_and_never_the_token():
    env = {"K": "v=1"}
    data = taskd.request(["a", "b c"], cwd="/w", env=env, user="1:2", home_set=True, limit_s=3)
    assert data.split(b"\0") == [
        *[b"1:2", b"/w", b"1", b"", b"3000"],
        *[b"2", b"a", b"b c", b"1", b"K=v=1", b""],
    ]


def transfer(engine, stdin=False, start_seconds=5.0):
    return taskd.open_transfer(
        engine, "c1", ["tar", "-c", "."], user="0", stdin=stdin, start_seconds=start_seconds
    )


def test_a_transfer_the_server_never_says_it_started_fails_at_its_bound(serve):
    server, engine = serve(lambda conn: time.sleep(0))
    begin = time.monotonic()
    with pytest.raises(OSError, match="did not start the command"):
        transfer(engine, start_seconds=0.5)
    assert time.monotonic() - begin < 3
    assert server.hung_up.wait(5)


def test_a_transfer_the_server_declines_goes_to_the_engine(serve):
    _, engine = serve(lambda conn: conn.sendall(frame(b"f", b"no")))
    assert transfer(engine) is None


def test_a_transfers_oversized_frame_or_odd_exit_breaks_it_off_without_reading_on(serve):
    def lie(conn):
        conn.sendall(
            frame(b"s", b"") + frame(b"e", b"size 3\n") + b"o" + (2**30).to_bytes(4, "big")
        )

    _, engine = serve(lie)
    served = transfer(engine)
    frames = served.frames()
    assert next(frames) == (2, b"size 3\n")
    with pytest.raises(OSError, match="broke the protocol"):
        next(frames)
    served.close()

    _, engine = serve(lambda conn: conn.sendall(frame(b"s", b"") + frame(b"x", b"999")))
    served = transfer(engine)
    assert list(served.frames()) == []
    assert served.exit_code is None  # not an exit the engine could give: a failure


def test_a_transfer_that_ends_before_its_exit_is_broken_off_not_whole(serve):
    def cut(conn):
        conn.sendall(frame(b"s", b"") + frame(b"o", b"half a tar"))
        conn.shutdown(socket.SHUT_WR)

    _, engine = serve(cut)
    frames = transfer(engine).frames()
    assert next(frames) == (1, b"half a tar")
    with pytest.raises(OSError, match="hung up before the exit"):
        next(frames)


def test_a_transfers_stdin_is_sent_after_the_start_and_ends_with_a_half_close(serve):
    got = bytearray()

    def take(conn):
        conn.sendall(frame(b"s", b""))
        while data := conn.recv(65536):
            got.extend(data)
        conn.sendall(frame(b"x", b"0"))

    _, engine = serve(take)
    served = transfer(engine, stdin=True)
    served.sock.sendall(b"tar bytes")
    served.sock.shutdown(socket.SHUT_WR)
    assert list(served.frames()) == []
    assert served.exit_code == 0
    assert bytes(got) == b"tar bytes"
