"""A trivial command in a running sandbox, three ways: what an exec costs on this engine.

    .venv/bin/python bench/exec_paths.py [--calls 15] [--at-once 1 4]

Per way and level N (N containers of `belvedir-sandbox:latest`, `--network none`, one thread a
container, `--calls` commands each, `mkdir -p /tmp/dN && chmod +x /tmp/dN` as Harbor's trivial
execs are), the median and p90 of a call and the wall time of the level:

- `docker exec`, runc: the baseline (Harbor's own Docker environment);
- `docker exec`, runsc: what a task sandbox's exec pays today (sandboxes/taskexec.py);
- a server inside the runsc container: a Python process started with the container reads
  commands as JSON lines on its attached stdin and runs each with `bash -c`, so no
  `runsc exec` is made per call (what an exec server inside the task container would cost;
  bench/README.md, issue 28 item 3). Not the platform's code: a measurement of the path;
- belvedir-taskd, runsc: the platform's own exec server (sandboxes/taskd.c, built by
  `make taskd`), called as the platform calls it (`sandboxes.taskd.run`: `bash -c`, the time
  limit kept by the server), each container started with it as a task sandbox is.

The ratio column is against `docker exec` under runsc at the same level. Its containers are
named `bench-exec-*` and removed at the end, also after a failure.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
from _common import median, table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sandboxes import taskd  # noqa: E402

IMAGE = "belvedir-sandbox:latest"
RUNTIMES = ("runc", "runsc")
SERVER = """import json, subprocess, sys
for line in sys.stdin:
    done = subprocess.run(["bash", "-c", json.loads(line)], capture_output=True, text=True)
    print(json.dumps({"exit_code": done.returncode}), flush=True)
"""


class Served:
    """A runsc container whose first process runs commands sent on its stdin."""

    def __init__(self, name: str):
        self.process = subprocess.Popen(
            ["docker", "run", "-i", "--rm", "--name", name, "--runtime", "runsc",
             "--network", "none", IMAGE, "python3", "-u", "-c", SERVER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def run(self, command: str) -> int:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())["exit_code"]


def level(calls: int, runners: list) -> tuple[float, float, float]:
    """Each runner called `calls` times from its own thread, all at once: median, p90, wall."""
    seconds: list[float] = []

    def work(k: int) -> None:
        for i in range(calls):
            begin = time.perf_counter()
            code = runners[k](f"mkdir -p /tmp/d{i} && chmod +x /tmp/d{i}")
            seconds.append(time.perf_counter() - begin)
            if code != 0:
                raise RuntimeError(f"the command exited {code}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(runners))]
    begin = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - begin
    if len(seconds) != calls * len(runners):
        raise RuntimeError("a call failed (see above)")
    ordered = sorted(seconds)
    return median(ordered), ordered[int(len(ordered) * 0.9)], wall


def docker_exec(container) -> Callable[[str], int]:
    return lambda command: container.exec_run(["bash", "-c", command]).exit_code


def served_by_taskd(client, name: str) -> Callable[[str], int]:
    """A runsc container started with the platform's exec server, as a task sandbox is."""
    command, binds, labels = taskd.container_parts(taskd.BUILT)
    container = client.containers.run(
        IMAGE, command, name=name, runtime="runsc", network="belvedir-sandbox",
        volumes=binds, labels=labels, init=True, detach=True, remove=True,
    )  # fmt: skip
    if not taskd.wait_listening(client, container.id):
        raise RuntimeError("belvedir-taskd did not start listening")

    def run(command: str) -> int:
        argv = ["bash", "-c", command]  # the time limit kept by the server, as the platform's
        events = taskd.run(
            client, container.id, argv, cwd=None, env={}, timeout=60, user="", limit_s=60
        )
        return list(events)[-1]["exit_code"]

    return run


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--at-once", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    client = docker.from_env()
    most = max(args.at_once)
    ways_named = RUNTIMES + ("served", "taskd")
    names = {
        way: [f"bench-exec-{way}-{k}-{secrets.token_hex(3)}" for k in range(most)]
        for way in ways_named
    }
    served: list[Served] = []
    rows = []
    try:
        ways = {
            f"docker exec, {runtime}": [
                docker_exec(
                    client.containers.run(
                        IMAGE,
                        ["sleep", "infinity"],
                        name=name,
                        runtime=runtime,
                        network_mode="none",
                        detach=True,
                        remove=True,
                    )
                )  # fmt: skip
                for name in names[runtime]
            ]
            for runtime in RUNTIMES
        }
        served = [Served(name) for name in names["served"]]
        for one in served:
            one.run("true")  # up and answering
        ways["server inside, runsc"] = [one.run for one in served]
        if taskd.BUILT.is_file():
            ways["belvedir-taskd, runsc"] = [served_by_taskd(client, n) for n in names["taskd"]]
        else:
            print(f"no {taskd.BUILT} (make taskd): the platform's exec server is not measured")
        for n in args.at_once:
            for way, runners in ways.items():
                rows.append((way, n, *level(args.calls, runners[:n])))
    finally:
        for one in served:
            one.process.stdin.close()
        subprocess.run(["docker", "rm", "-f", *sum(names.values(), [])], capture_output=True)
        for one in served:
            one.process.wait(timeout=60)
    base = {n: med for way, n, med, _, _ in rows if way == "docker exec, runsc"}
    print(f"\na trivial command in a running sandbox, {args.calls} calls per container (ms):")
    print(table(
        [[way, n, f"{med * 1000:.0f}", f"{p90 * 1000:.0f}", f"{wall:.2f}", f"{med / base[n]:.2f}x"]
         for way, n, med, p90, wall in rows],
        ["way", "at once", "median", "p90", "wall s", "ratio"],
    ))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
