"""A task sandbox's exec server (sandboxes/taskd.c, docs/task-sandboxes.md): how its container
is started with it, and the platform's side of a command run through it.

Under gVisor each `docker exec` starts a `runsc exec`, ~50 ms more than the command itself
(bench/exec_paths.py); a Harbor trial makes about a dozen. So a task container's command is the
static `belvedir-taskd`, bind-mounted read-only from this host, instead of `sleep infinity`;
it listens on TASKD_PORT of the container's address on the sandbox network, and the platform
connects there. Each side proves it holds the container's token (a label only the engine's
clients read, and the server's argument) by an HMAC of the other's fresh nonce before
anything else is sent, so a request never reaches whatever holds the address later (a
container gone, its address another tenant's) and the token never crosses the wire. Where
there is no server (not built, an engine on another host, a network with no address of its
own), it cannot prove itself, or it declines a command, the command goes by `docker exec`
as before: the engine then names the container itself.

What comes back is the task's word, as its output always was: the task runs as root beside
the server and may replace it. So the limits are this side's: a frame is at most FRAME_MAX
bytes and read one at a time (nothing is held ahead of the reader), the deadline is this
side's clock, and closing the connection (at the deadline, or when the reader stops) has the
server kill the command's process group. Pure Python, no Django.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import os
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import requests

PORT = 51117  # sandboxes/taskd.c's TASKD_PORT
LABEL = "belvedir.taskd"  # the token; "" where the container has no server
MOUNT = "/.belvedir/taskd"
BUILT = Path(__file__).resolve().parent / "bin" / "belvedir-taskd"  # `make taskd`
FRAME_MAX = 65536
REQUEST_MAX = 4 << 20
CONNECT_S = 2.0
HEARTBEAT_SECONDS = 15.0
GRACE_SECONDS = 5.0  # past the command's own timeout, as the engine's path waits
_NO_ADDRESS = {"host", "none"}


def usable(client: docker.DockerClient, binary: Path | None, network: str) -> bool:
    """Whether a container on `network` of `client`'s engine can have the server: it is built,
    the engine is on this host (the bind mount's source is this host's file) and the
    network gives the container an address of its own."""
    if binary is None or network in _NO_ADDRESS or network.startswith("container:"):
        return False
    local = client.api.base_url.startswith("http+docker://")  # a unix socket: this host
    return local and binary.is_file()


def container_parts(binary: Path) -> tuple[list[str], dict, dict[str, str]]:
    """The command, bind and label that start a container with its own server (its token the
    server's argument, which it wipes from its command line)."""
    token = secrets.token_hex(32)
    return [MOUNT, token], {str(binary): {"bind": MOUNT, "mode": "ro"}}, {LABEL: token}


@dataclasses.dataclass(frozen=True)
class Where:
    """A container's server: its address, its token, whether its env sets HOME."""

    address: str
    token: str
    home_set: bool = False


# Where each container's server is, by container id (never reused), learned once per process.
_WHERE: OrderedDict[str, Where | None] = OrderedDict()
_KEPT = 4096


def _where(client: docker.DockerClient, container_id: str) -> Where | None:
    if container_id in _WHERE:
        return _WHERE[container_id]
    try:
        attrs = client.api.inspect_container(container_id)
    except (docker.errors.DockerException, requests.RequestException):
        return None  # not kept: the engine may answer next time
    config = attrs.get("Config") or {}
    token = (config.get("Labels") or {}).get(LABEL, "")
    networks = (attrs.get("NetworkSettings") or {}).get("Networks") or {}
    address = next((n.get("IPAddress") for n in networks.values() if n.get("IPAddress")), "")
    home_set = any(line.startswith("HOME=") for line in config.get("Env") or [])
    found = Where(address, token, home_set) if token and address else None
    if found is not None or attrs.get("State", {}).get("Running"):
        _remember(container_id, found)
    return found


def _remember(container_id: str, found: Where | None) -> None:
    _WHERE[container_id] = found
    _WHERE.move_to_end(container_id)
    while len(_WHERE) > _KEPT:
        _WHERE.popitem(last=False)


def forget(container_id: str) -> None:
    """What this process learned of the container (it was removed, or its server did not
    prove itself): the next call asks the engine again."""
    _WHERE.pop(container_id, None)


def proof(token: str, label: bytes, first: bytes, second: bytes) -> bytes:
    """HMAC-SHA256(token, label first second): a side's proof that it holds the token."""
    return hmac.new(token.encode(), label + first + second, hashlib.sha256).digest()


def wait_listening(client: docker.DockerClient, container_id: str, seconds: float = 3.0) -> bool:
    """Wait until the container's server takes connections (it starts with the container, a
    few tens of ms later under gVisor), so the first command already goes by it."""
    where = _where(client, container_id)
    end = time.monotonic() + seconds
    while where is not None and time.monotonic() < end:
        try:
            socket.create_connection((where.address, PORT), timeout=CONNECT_S).close()
            return True
        except OSError:
            time.sleep(0.01)
    return False


def request(
    argv: list[str],
    *,
    cwd: str | None,
    env: dict[str, str],
    user: str,
    home_set: bool = False,
    transfer: bool = False,
    limit_s: int | None = None,
) -> bytes:
    """A request's fields as the server reads them (sandboxes/taskd.c); `limit_s`: kill the
    command's process group after that many seconds."""
    fields = [user, cwd or "", "1" if home_set else "", "t" if transfer else ""]
    fields += ["" if limit_s is None else str(limit_s * 1000), str(len(argv)), *argv]
    fields.append(str(len(env)))
    fields += [f"{key}={value}" for key, value in env.items()]
    if any("\0" in one for one in fields):
        raise ValueError("a NUL in the command, its env, user or cwd")
    return b"".join(one.encode() + b"\0" for one in fields)


def _connect(client: docker.DockerClient, container_id: str, where: Where, body: bytes):
    """A connection to the container's server with `body` sent, once the server proved it
    holds the container's token; None where it did not (nothing of `body` was sent)."""
    try:
        sock = socket.create_connection((where.address, PORT), timeout=CONNECT_S)
    except TimeoutError:
        _remember(container_id, None)  # no route from here: not asked again
        return None
    except OSError:
        return None  # not listening yet (just started), or gone: the engine says which
    ours = secrets.token_bytes(16)
    try:
        sock.sendall(b"BTD2" + ours)
        answer = b""
        while len(answer) < 48 and (got := sock.recv(48 - len(answer))):
            answer += got
        theirs, said = answer[:16], answer[16:]
        if len(answer) < 48 or not hmac.compare_digest(
            said, proof(where.token, b"server", ours, theirs)
        ):
            sock.close()
            forget(container_id)  # not this container's server (any more): the engine decides
            return None
        mine = proof(where.token, b"client", theirs, ours)
        sock.sendall(mine + len(body).to_bytes(4, "big") + body)
    except OSError:
        sock.close()
        return None  # the server reads a request whole before it runs anything
    return sock


def run(
    client: docker.DockerClient,
    container_id: str,
    argv: list[str],
    *,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    user: str,
    limit_s: int | None = None,
) -> Iterator[dict] | None:
    """The command's events (as `taskexec.exec_events` yields them, first {"fallback": why}
    when the server did not run it), or None where the container has no server to ask
    (nothing was sent). `limit_s`: the server kills it then (else the argv's own `timeout`);
    this side's deadline is `timeout` + GRACE_SECONDS either way."""
    where = _where(client, container_id)
    if where is None:
        return None
    try:
        body = request(argv, cwd=cwd, env=env, user=user, home_set=where.home_set, limit_s=limit_s)
    except ValueError:
        return None
    if len(body) > REQUEST_MAX:
        return None
    sock = _connect(client, container_id, where, body)
    return None if sock is None else _events(sock, timeout)


class _Frames:
    """Frames off the socket, one at a time: at most one frame's bytes are ever held."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = bytearray()

    def next(self, wait: float | None) -> tuple[str, bytes] | None:
        """The next frame; None when `wait` s passed with no whole frame (None: no limit of
        its own); EOFError when the server closed; ValueError when it broke the protocol."""
        end = None if wait is None else time.monotonic() + wait
        while True:
            if len(self.buffer) >= 5:
                size = int.from_bytes(self.buffer[1:5], "big")
                if size > FRAME_MAX:
                    raise ValueError(f"a frame of {size} bytes (at most {FRAME_MAX})")
                if size == 0 and self.buffer[0] in b"oe":  # never sent: output costs its bytes
                    raise ValueError("an empty output frame")
                if len(self.buffer) >= 5 + size:
                    kind, payload = chr(self.buffer[0]), bytes(self.buffer[5 : 5 + size])
                    del self.buffer[: 5 + size]
                    return kind, payload
                want = 5 + size - len(self.buffer)
            else:
                want = 5 - len(self.buffer)
            if end is not None:  # else the socket is blocking already (`open_transfer`)
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.sock.settimeout(left)
            try:
                got = self.sock.recv(want)
            except TimeoutError:
                return None
            if not got:
                raise EOFError
            self.buffer += got


class Transfer:
    """A file transfer's command run by the container's server (sandboxes/taskfiles.py): its
    socket (what is sent on it is the command's stdin, up to a half-close), its output as the
    engine's demuxed frames, then `exit_code` (None: it broke off). The caller's own deadline
    shuts the socket down to end a blocked read, as it does the engine's."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.exit_code: int | None = None
        self._frames = _Frames(sock)

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """(1, stdout bytes) and (2, stderr bytes), as docker-py's `frames_iter` gives them;
        OSError where the server broke the protocol."""
        while True:
            try:
                got = self._frames.next(None)
            except EOFError:
                raise OSError("the task sandbox's exec server hung up before the exit") from None
            except ValueError as exc:
                raise OSError(f"the task sandbox's exec server broke the protocol: {exc}") from exc
            kind, payload = got
            if kind in ("o", "e"):
                yield (1 if kind == "o" else 2), payload
            elif kind == "x" and payload.isdigit() and len(payload) <= 3:
                self.exit_code = int(payload) if int(payload) <= 255 else None
                return
            else:
                raise OSError(
                    f"the task sandbox's exec server broke the protocol: a {kind!r} frame"
                )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def open_transfer(
    client: docker.DockerClient,
    container_id: str,
    argv: list[str],
    *,
    user: str,
    stdin: bool,
    start_seconds: float,
) -> Transfer | None:
    """A transfer's command started by the container's server, once it says it started; None
    where there is no server to ask or it declined (nothing ran: the engine runs it). OSError
    when the server took the request but said neither within `start_seconds`."""
    where = _where(client, container_id)
    if where is None:
        return None
    try:
        body = request(argv, cwd=None, env={}, user=user, transfer=True)
    except ValueError:
        return None
    sock = _connect(client, container_id, where, body)
    if sock is None:
        return None
    if not stdin:
        with contextlib.suppress(OSError):  # no stdin: the command reads EOF, as with the engine
            sock.shutdown(socket.SHUT_WR)
    transfer = Transfer(sock)
    try:
        first = transfer._frames.next(start_seconds)
    except (OSError, EOFError, ValueError) as exc:
        transfer.close()
        raise OSError(f"the task sandbox's exec server did not start the command: {exc}") from exc
    if first is not None and first[0] == "f":
        transfer.close()
        return None
    if first is None or first[0] != "s":
        transfer.close()
        raise OSError("the task sandbox's exec server did not start the command")
    # Blocking from here on, set once: an upload's stdin is sent from one thread while its
    # output is read from another, and a timeout changed under a send breaks it (EAGAIN);
    # the caller's deadline shuts the socket down instead, as it does the engine's.
    sock.settimeout(None)
    return transfer


def _events(sock: socket.socket, timeout: float) -> Iterator[dict]:
    started = time.monotonic()
    deadline = started + timeout + GRACE_SECONDS  # `timeout` in the command kills first
    frames = _Frames(sock)
    said = False  # anything yielded yet (output or a heartbeat): a decline is then too late
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                yield {"exit_code": -1, "timed_out": True}  # closing kills what is left
                return
            try:
                got = frames.next(min(HEARTBEAT_SECONDS, left))
            except OSError as exc:
                yield {"error": f"the command's output broke off: {exc}"}
                return
            except EOFError:
                yield {"error": "the command's output broke off: the exec server hung up"}
                return
            except ValueError as exc:
                yield {"error": f"the task sandbox's exec server broke the protocol: {exc}"}
                return
            if got is None:
                if time.monotonic() < deadline:
                    said = True
                    yield {"heartbeat": True}
                continue
            kind, payload = got
            if kind in ("o", "e"):
                said = True
                text = payload.decode("utf-8", errors="replace")
                yield {"stream": "stdout" if kind == "o" else "stderr", "data": text}
            elif kind == "x" and payload.isdigit() and len(payload) <= 3 and int(payload) <= 255:
                code = int(payload)
                timed_out = code == 137 and time.monotonic() - started >= timeout - 1
                yield {"exit_code": code, "timed_out": timed_out}
                return
            elif kind == "f" and not said:
                yield {"fallback": payload[:200].decode("utf-8", errors="replace")}
                return
            else:
                yield {
                    "error": "the task sandbox's exec server broke the protocol: "
                    f"a {kind!r} frame of {len(payload)} bytes"
                }
                return
    finally:
        with contextlib.suppress(OSError):
            sock.close()


def built(setting: str | os.PathLike) -> Path | None:
    """The server binary BELVEDIR_TASK_EXEC_SERVER names: "on" the one `make taskd` builds,
    "off" none, else a path."""
    if str(setting) == "off":
        return None
    return BUILT if str(setting) in ("on", "") else Path(setting)
