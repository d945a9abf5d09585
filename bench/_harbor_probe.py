"""The platform's processes as bench/harbor_managed.py runs them, with timing probes.

    python bench/_harbor_probe.py web --port N      # uvicorn on belvedir.asgi, probed
    python bench/_harbor_probe.py qcluster          # manage.py qcluster, probed

Each probe appends one JSON line per event, `{"t": <start>, "end": <end>, "what": ..., ...}`
(time.time(), seconds), to the file named by BENCH_HARBOR_PROBE; lines under PIPE_BUF are
written whole with O_APPEND, so the web server's threads and the cluster's forked workers
share one file. The probes wrap the platform's functions in these processes only (as
bench/run_overhead.py wraps them in its own): nothing in the platform changes.

Web: every HTTP request (method, path, from the request's arrival to its last body byte) and,
inside a task sandbox's create, the image lookup and build, the container's start; inside an
exec, the engine's exec calls. Cluster: the claim, the clone, the run sandbox's start, the
output lines the benchmark times by (the entrypoint's run line, the driver's `harbor run`,
its score), the end of the output and the run's finish.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKERS = {
    "run command": "belvedir: starting the run command",
    "harbor run": "belvedir-harbor: harbor run",
    "harbor done": "belvedir-harbor: score",
}


def emit(what: str, start: float, end: float | None = None, **fields) -> None:
    path = os.environ.get("BENCH_HARBOR_PROBE")
    if not path:
        return
    line = json.dumps(
        {
            "t": start,
            "end": start if end is None else end,
            "what": what,
            "pid": os.getpid(),
            "thread": threading.get_ident(),
            **fields,
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def wrap(owner, attr: str, what: str, fields=None) -> None:
    """Time every call of owner.attr as event `what` (`fields(args, kwargs, result)`: more)."""
    original = getattr(owner, attr)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.time()
        result = original(*args, **kwargs)
        emit(what, start, time.time(), **(fields(args, kwargs, result) if fields else {}))
        return result

    setattr(owner, attr, timed)


def wrap_stream(owner, attr: str, what: str, fields=None) -> None:
    """Time a call that returns an iterator, from the call to the iterator's end."""
    original = getattr(owner, attr)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.time()
        extra = fields(args, kwargs) if fields else {}

        def events():
            try:
                yield from original(*args, **kwargs)
            finally:
                emit(what, start, time.time(), **extra)

        return events()

    setattr(owner, attr, timed)


def probed_asgi(application):
    """Each HTTP request: its method, path, arrival and the end of its answer's body."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return await application(scope, receive, send)
        start = time.time()
        answer = {"status": 0}

        async def sending(message):
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            await send(message)

        try:
            await application(scope, receive, sending)
        finally:
            emit(
                "http",
                start,
                time.time(),
                method=scope["method"],
                path=scope["path"],
                status=answer["status"],
            )

    return app


def _sandbox_id(args, kwargs, *_):
    handle = args[1] if len(args) > 1 else kwargs.get("handle")
    return {"container": getattr(handle, "id", ""), "command": kwargs.get("command", "")[:120]}


def _task_launch(args, kwargs, handle) -> dict:
    from sandboxes.base import LABEL_TASK_SANDBOX

    spec = args[1] if len(args) > 1 else kwargs.get("spec")
    return {"task": LABEL_TASK_SANDBOX in (getattr(spec, "labels", None) or {})}


def web_probes() -> None:
    from harbor import services
    from sandboxes.docker import DockerBackend

    wrap(DockerBackend, "image_tag", "create: image key")
    wrap(
        DockerBackend,
        "build_image",
        "create: build or cache hit",
        lambda a, k, cached: {"cached": bool(cached), "tag": k.get("tag", "")},
    )
    wrap(DockerBackend, "image_workdir", "create: image workdir")
    wrap(
        DockerBackend,
        "launch",
        "create: container start",
        lambda a, k, handle: {"container": handle.id, "warm": bool(getattr(handle, "warm", ""))},
    )
    wrap(services, "_reserve", "create: reserve a slot")
    wrap(
        services,
        "task_sandbox_create",
        "create",
        lambda a, k, sandbox: {"sandbox": sandbox.pk, "container": sandbox.container_id},
    )
    wrap(services, "task_sandbox_stop", "stop", lambda a, k, s: {"sandbox": s.pk})
    wrap_stream(DockerBackend, "exec_stream", "exec: engine", _sandbox_id)


def cluster_probes() -> None:
    from runs import executor
    from runs.logtail import LogTail
    from sandboxes.docker import DockerBackend

    wrap(executor, "run_claim", "claim", lambda a, k, r: {"run": k.get("run_id", "")})
    wrap(executor, "clone_repo", "clone")
    wrap(executor.Execution, "prepare", "prepare (clone, workspace tar)")
    # The run's sandbox, or (harbor/warm.py) a warm task sandbox the worker starts.
    wrap(DockerBackend, "launch", "run sandbox start", _task_launch)
    wrap(executor.Execution, "follow", "follow")
    wrap(executor.Execution, "finish", "finish")
    wrap(executor, "run_finish", "run finished", lambda a, k, r: {"run": k.get("run_id", "")})
    original = LogTail._add
    told: dict[int, int] = {}  # per run's tail: how many markers went by, in their order
    names = list(MARKERS)

    def add(self, text):
        now, rest = time.time(), text
        if os.environ.get("BENCH_HARBOR_OUTPUT"):  # every chunk, to read what took the time
            emit("output", now, text=text[:300])
        # The install's --check prints the harbor command too: each marker counts only after
        # the one before it (one chunk may hold several).
        while told.get(id(self), 0) < len(names):
            what = names[told.get(id(self), 0)]
            if MARKERS[what] not in rest:
                break
            rest = rest.split(MARKERS[what], 1)[1]
            told[id(self)] = told.get(id(self), 0) + 1
            emit(f"line: {what}", now)
        return original(self, text)

    LogTail._add = add


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
    kind = sys.argv[1]
    if kind == "web":
        import uvicorn

        from belvedir.asgi import application

        web_probes()
        port = int(sys.argv[sys.argv.index("--port") + 1])
        uvicorn.run(
            probed_asgi(application),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
        )
    elif kind == "qcluster":
        import django

        django.setup()
        cluster_probes()
        from django.core.management import execute_from_command_line

        execute_from_command_line(["manage.py", "qcluster"])
    else:
        raise SystemExit(f"unknown process {kind!r}: web or qcluster")


if __name__ == "__main__":
    main()
