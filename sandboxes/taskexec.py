"""Commands and files in a running task sandbox on the Docker engine (docs/task-sandboxes.md):
run a command with a time limit and stream its output, put a tar into a directory, read one
back. Pure Python and docker SDK, no Django; the Docker backend's `exec_stream`, `put_files`,
and `open_files` (`sandboxes.taskbackend`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

import docker
import docker.errors
import requests

from sandboxes import taskd

HEARTBEAT_SECONDS = 15.0
EXEC_BACKLOG = 16  # output chunks an exec stream holds before it stops reading from the engine

# `timeout` (coreutils) kills the command's whole process group at the deadline; images
# without it still get the platform's own deadline. `bash -c` as Harbor's own Docker and Modal
# environments run it: a login shell would read /etc/profile, which resets PATH on Debian
# (the image's ENV PATH and the PATH a caller passes would be lost). Where the container is
# known to have `timeout` (`tools_of`), the exec starts it directly, without the `sh` that
# asks: under gVisor every process started in the sandbox costs (bench/README.md). Where that
# start fails (the task removed its `timeout`), the call and the container's later ones go
# through `sh` again.
_RUN = (
    'if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL "$0" bash -c "$1"; '
    'else exec bash -c "$1"; fi'
)


def exec_command(tools: Tools, *, command: str, timeout: float, env: dict[str, str]) -> list[str]:
    """The argv of an exec: `timeout -s KILL N bash -c CMD` where `timeout` is known to be
    there (and no PATH of the caller's could hide it), else asked for by `sh` first."""
    seconds = str(max(1, int(timeout)))
    if tools.timeout and "PATH" not in env:
        return ["timeout", "-s", "KILL", seconds, "bash", "-c", command]
    return ["sh", "-c", _RUN, seconds, command]


def exec_events(
    client: docker.DockerClient,
    container_id: str,
    *,
    command: str,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    user: str = "",
) -> Iterator[dict]:
    """Run `command` under `bash -c` (as `user`, a name or uid; "": the image's), by the
    container's own exec server where it has one (`sandboxes.taskd`), else `docker exec`;
    yields {"stream", "data"} as output arrives,
    {"heartbeat": True} after HEARTBEAT_SECONDS of silence, and last {"exit_code",
    "timed_out"} (or {"error"} when the engine lost it)."""
    argv = exec_command(tools_of(container_id), command=command, timeout=timeout, env=env)
    run = dict(cwd=cwd, env=env, timeout=timeout, user=user)
    # The server keeps the time limit itself: one process fewer than `timeout` (bench/).
    limit = max(1, int(timeout))
    served = taskd.run(client, container_id, ["bash", "-c", command], **run, limit_s=limit)
    if served is not None:
        first = next(served, None)
        if first is not None and "fallback" not in first:
            yield first
            yield from served
            return
        served.close()  # declined before anything ran: the engine runs it, its own way
    events = _exec_run(client, container_id, argv, **run)
    try:
        held = [next(events, None)]
        if argv[0] == "timeout" and _failed_to_start(held[0]):
            held.append(next(events, None))
            if (held[-1] or {}).get("exit_code") in (126, 127):
                events.close()
                learned(container_id, timeout=False)
                argv = exec_command(Tools(), command=command, timeout=timeout, env=env)
                events, held = _exec_run(client, container_id, argv, **run), []
        yield from (event for event in held if event is not None)
        yield from events
    finally:
        events.close()


def _failed_to_start(event: dict | None) -> bool:
    """The engine's word that the exec's program is not there (it comes as the output)."""
    return (
        bool(event)
        and event.get("stream") == "stdout"
        and event["data"].startswith("OCI runtime exec failed")
    )


def _exec_run(
    client: docker.DockerClient,
    container_id: str,
    argv: list[str],
    *,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    user: str,
) -> Iterator[dict]:
    try:
        created = client.api.exec_create(
            container_id,
            argv,
            environment=env or None,
            workdir=cwd or None,
            user=user,
        )
        output = client.api.exec_start(created["Id"], stream=True, demux=True)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        yield {"error": f"could not start the command: {exc}"}
        return
    # Bounded: the output waits in the engine while the caller reads slowly, not in memory.
    events: queue.Queue = queue.Queue(maxsize=EXEC_BACKLOG)
    closed = threading.Event()

    def put(item) -> bool:
        while not closed.is_set():
            try:
                events.put(item, timeout=1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for out, err in output:
                if (out and not put(("stdout", out))) or (err and not put(("stderr", err))):
                    return  # nobody reads any more
        except Exception as exc:  # the container went away under it
            put(("error", str(exc)))
        finally:
            with contextlib.suppress(Exception):
                output.close()
        put(("end", None))

    threading.Thread(target=read, daemon=True, name=f"exec {created['Id'][:12]}").start()
    try:
        yield from _exec_events(client, created["Id"], events, timeout)
    finally:
        closed.set()


def _exec_events(
    client: docker.DockerClient, exec_id: str, events: queue.Queue, timeout: float
) -> Iterator[dict]:
    started = time.monotonic()
    deadline = started + timeout + 5  # `timeout` kills first; this is the platform's own stop
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            yield {"exit_code": -1, "timed_out": True}
            return
        try:
            kind, data = events.get(timeout=min(HEARTBEAT_SECONDS, left))
        except queue.Empty:
            if time.monotonic() < deadline:
                yield {"heartbeat": True}
            continue
        if kind in ("stdout", "stderr"):
            yield {"stream": kind, "data": data.decode("utf-8", errors="replace")}
        elif kind == "error":
            yield {"error": f"the command's output broke off: {data}"}
            return
        else:
            break
    try:
        code = client.api.exec_inspect(exec_id).get("ExitCode")
    except (docker.errors.DockerException, requests.RequestException) as exc:
        yield {"error": f"could not read the command's exit code: {exc}"}
        return
    code = -1 if code is None else int(code)
    timed_out = code == 137 and time.monotonic() - started >= timeout - 1
    yield {"exit_code": code, "timed_out": timed_out}


@dataclasses.dataclass(frozen=True)
class Tools:
    """What a container has (None: not learned yet)."""

    tar: bool | None = None
    timeout: bool | None = None


# What the calls learned of each container's tar and timeout, by container id, never by
# image: the container changes its own files (a task may remove its tar or plant a `timeout`),
# and its `sh` is its own, so what one says holds for its own later calls only. A task that
# lies breaks only its own calls, never a limit: the deadlines and byte counts do not depend
# on them (docs/task-sandboxes.md).
_TOOLS: OrderedDict[str, Tools] = OrderedDict()
_KEPT = 4096


def tools_of(container_id: str) -> Tools:
    """What is known of the container's tar and timeout."""
    return _TOOLS.get(container_id, Tools())


def learned(container_id: str, **found: bool) -> None:
    """Record what a call on the container found (tar=..., timeout=...)."""
    _TOOLS[container_id] = dataclasses.replace(tools_of(container_id), **found)
    _TOOLS.move_to_end(container_id)
    while len(_TOOLS) > _KEPT:
        _TOOLS.popitem(last=False)
