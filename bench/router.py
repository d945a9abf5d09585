"""The model router's overhead: what it adds over calling the upstream directly, on both of
its paths (a covered call, and an own-key call proxied to the user's base with the user's
key), and 100 concurrent streams through one server process on each path.

    .venv/bin/python bench/router.py [--calls 300] [--streams 100] [--keep-db]

* Upstream: the tests' local OpenAI-compatible server (tests/router/fake_upstream.py) in a
  process of its own on 127.0.0.1: a 5-word answer with usage, at once (the latency phases),
  and a second one streaming 20 words 50 ms apart (the concurrency phase).
* Router: `uvicorn belvedir.asgi:application`, ONE process, DEBUG off, on PostgreSQL
  database `belvedir_bench_router` (dropped and created at start, dropped at the end), with a
  covered model in the catalog, a running covered run and a running own-key run (proxied:
  its base the same upstream, its key the user's) whose keys the calls use. A covered call
  is admitted (key, run, price), reserved, forwarded, settled and recorded as a span; an
  own-key call is admitted, forwarded through the pinned client (router/pinned.py: each new
  connection resolved, checked and pinned; BELVEDIR_DEV=1 here, so the check passes) and
  recorded as a span billed to the provider.
* Latency: --calls non-streaming calls and --calls streaming calls, one at a time over
  keep-alive connections, round-robin between direct, covered and own-key (after 20 warm-up
  calls of each). Non-streaming: the whole call; streaming: time to the first content event.
  Added latency = router minus direct, at p50 and p95 (and the median of paired differences).
  Also the CPU time per call of the upstream's and the router's process (all threads, the
  router's batched settlements included, both router paths together), which a loaded
  machine inflates far less than the wall-clock figures.
* Concurrency: --streams streams started at once through the router (asyncio, httpx) on each
  path, each 20 words over ~1 s; every stream must finish with its whole text and `[DONE]`;
  afterwards the covered run's spend must be exactly the streams' cost with nothing left
  reserved, and each run must hold one span per call.

Prints the figures and PASS/MISS against the targets (p50 added latency <= 3 ms on each path,
100 concurrent streams with no errors). Exits 0 unless something errored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common
from _common import table
from _profile import print_profile, py_spy

DB_NAME = "belvedir_bench_router"
MODEL = "benchlab/bench-model"
TARGET_ADDED_MS = 3.0
WARMUP = 20
MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
STREAM_WORDS = 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited early: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} never opened")


def start(args: list[str], env: dict, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *args, "--port", str(port)],
        cwd=_common.ROOT,
        env={**os.environ, "PYTHONPATH": str(_common.ROOT), **env},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for_port(port, process, log)
    return process, port


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _running_run(project, **fields) -> tuple[str, str]:
    """A running run of the bench model with its key; (run id, run key)."""
    from belvedir import crypto, services
    from belvedir.models import ApiKey
    from runs.models import Run

    run = Run.objects.create(project=project, status="running", model=MODEL, **fields)
    run.ingest_key, key = services.api_key_create(
        project=project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.run_key_encrypted = crypto.encrypt(key)
    run.save(update_fields=["ingest_key", "run_key_encrypted"])
    return run.pk, key


def covered_run() -> tuple[str, str]:
    """A running covered run with a large cap in a fresh organization; (run id, run key)."""
    from belvedir import services
    from belvedir.models import Membership
    from models_registry.models import CoveredModel, Lab

    user = services.user_signup(
        email="bench@example.com", password="correct-horse-9", organization_name="Bench"
    )
    project = Membership.objects.get(user=user).organization.projects.get()
    lab = Lab.objects.create(name="Bench Lab", slug="benchlab", vendor_prefixes="benchlab")
    CoveredModel.objects.create(
        model_id=MODEL,
        display_name="Bench model",
        lab=lab,
        input_price_micros=100_000,
        output_price_micros=300_000,
        max_output_tokens=64,
    )
    return _running_run(
        project,
        harness_name="bench",
        covered=True,
        model_covered=True,
        covered_cap_micros=10**12,
    )


def own_key_run(base: str) -> tuple[str, str]:
    """A running own-key run of the bench's organization whose calls the router proxies to
    `base` with the user's key; (run id, run key)."""
    from belvedir import crypto
    from belvedir.models import Project

    return _running_run(
        Project.objects.get(organization__name="Bench"),
        harness_name="bench own key",
        model_proxied=True,
        model_api_base_resolved=base,
        model_api_key_encrypted=crypto.encrypt("sk-bench-user"),
    )


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_call(http, url: str, key: str, stream: bool) -> float:
    """Seconds to the whole answer, or (streaming) to the first content event."""
    body = {"model": MODEL, "messages": MESSAGES, "stream": stream}
    headers = {"Authorization": f"Bearer {key}"}
    began = time.perf_counter()
    if not stream:
        response = http.post(f"{url}/chat/completions", json=body, headers=headers)
        elapsed = time.perf_counter() - began
        if response.status_code != 200 or not response.json()["choices"]:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
        return elapsed
    first = None
    with http.stream("POST", f"{url}/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.read()[:300]!r}")
        for line in response.iter_lines():
            if first is None and line.startswith("data:") and '"content"' in line:
                first = time.perf_counter() - began
    if first is None:
        raise RuntimeError(f"{url}: no content event")
    return first


def latency(legs: list[tuple[str, str, str]], calls: int, stream: bool, pids: tuple[int, int]):
    """`calls` calls on each leg ((name, base URL, key); the first is the direct one),
    round-robin, its order rotating each round; each router leg against the direct one."""
    import httpx

    clients = [httpx.Client(timeout=30) for _ in legs]
    try:
        for _ in range(WARMUP):
            for http, (_, url, key) in zip(clients, legs, strict=True):
                one_call(http, url, key, stream)
        times: list[list[float]] = [[] for _ in legs]
        cpu_before = [cpu_seconds(pid) for pid in pids]
        for i in range(calls):
            for j in range(len(legs)):
                leg = (i + j) % len(legs)
                times[leg].append(one_call(clients[leg], legs[leg][1], legs[leg][2], stream))
        time.sleep(0.5)  # the last settlements (written in batches, after the answers)
        cpu = [(cpu_seconds(pid) - b) / calls for pid, b in zip(pids, cpu_before, strict=True)]
    finally:
        for http in clients:
            http.close()
    direct = times[0]
    results = {}
    for (name, _, _), through in zip(legs[1:], times[1:], strict=True):
        paired = [r - d for r, d in zip(through, direct, strict=True)]
        results[name] = {
            "direct": direct,
            "router": through,
            "added_p50": percentile(through, 0.5) - percentile(direct, 0.5),
            "added_p95": percentile(through, 0.95) - percentile(direct, 0.95),
            "paired_median": statistics.median(paired),
            "cpu_direct": cpu[0],
            "cpu_router": cpu[1] / (len(legs) - 1),
        }
    return results


async def concurrent_streams(router: str, key: str, streams: int) -> dict:
    import httpx

    expected = " ".join(f"w{i}" for i in range(STREAM_WORDS))
    body = {"model": MODEL, "messages": MESSAGES, "stream": True}
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=streams * 2, max_keepalive_connections=streams)

    async def one(http) -> str | None:
        parts, done = [], False
        try:
            async with http.stream(
                "POST", f"{router}/chat/completions", json=body, headers=headers
            ) as response:
                if response.status_code != 200:
                    return f"status {response.status_code}"
                async for line in response.aiter_lines():
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data:") and '"content"' in line:
                        event = json.loads(line[5:])
                        for choice in event.get("choices") or []:
                            parts.append((choice.get("delta") or {}).get("content") or "")
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if not done or "".join(parts) != expected:
            return f"incomplete: done={done} text={''.join(parts)[:60]!r}"
        return None

    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        began = time.perf_counter()
        errors = await asyncio.gather(*(one(http) for _ in range(streams)))
        wall = time.perf_counter() - began
    return {"errors": [e for e in errors if e], "wall": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--profile", action="store_true", help="py-spy the router process")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    database_url = _common.database_recreate(DB_NAME)
    _common.django_setup(database_url)
    run_id, key = covered_run()
    from django.db import connections

    connections.close_all()
    workdir = Path(tempfile.mkdtemp(prefix="bench-router-"))
    processes = []
    try:
        fake = ["-m", "tests.router.fake_upstream"]
        fast, fast_port = start([*fake, "--words", "5"], {}, workdir / "fast.log")
        processes.append(fast)
        slow, slow_port = start(
            [*fake, "--words", str(STREAM_WORDS), "--chunk-delay", "0.05"], {}, workdir / "slow.log"
        )
        processes.append(slow)
        server_env = {
            "DATABASE_URL": database_url,
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "belvedir.settings",
            "BELVEDIR_ROUTER_UPSTREAM_KEY": "sk-bench",
        }
        uvicorn = ["-m", "uvicorn", "belvedir.asgi:application", "--host", "127.0.0.1"]
        uvicorn += ["--no-access-log", "--log-level", "warning"]
        direct = f"http://127.0.0.1:{fast_port}/v1"
        router, router_port = start(
            uvicorn, {**server_env, "BELVEDIR_ROUTER_UPSTREAM_BASE": direct}, workdir / "router.log"
        )
        processes.append(router)
        router_url = f"http://127.0.0.1:{router_port}/api/v1"
        own_id, own_key = own_key_run(direct)
        connections.close_all()
        legs = [("direct", direct, "sk-bench"), ("covered", router_url, key)]
        legs.append(("own key", router_url, own_key))

        profiler = py_spy(router.pid, 600, workdir / "profile.txt") if args.profile else None
        if profiler:
            time.sleep(1.0)  # let py-spy attach
        pids = (fast.pid, router.pid)
        plain = latency(legs, args.calls, stream=False, pids=pids)
        streamed = latency(legs, args.calls, stream=True, pids=pids)
        if profiler:
            profiler.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            profiler.wait(timeout=30)
        stop(router)
        slow_direct = f"http://127.0.0.1:{slow_port}/v1"
        from runs.models import Run
        from traces.models import Span

        Run.objects.filter(pk=own_id).update(model_api_base_resolved=slow_direct)
        connections.close_all()
        router, router_port = start(
            uvicorn,
            {**server_env, "BELVEDIR_ROUTER_UPSTREAM_BASE": slow_direct},
            workdir / "router-streams.log",
        )
        processes.append(router)
        streams_url = f"http://127.0.0.1:{router_port}/api/v1"
        concurrency = {
            name: asyncio.run(concurrent_streams(streams_url, k, args.streams))
            for name, k in (("covered", key), ("own key", own_key))
        }
        stop(router)  # a SIGTERM: the server writes the settlements still pending, then exits
        run = Run.objects.get(pk=run_id)
        spans = Span.objects.filter(run=run).count()
        own_spans = Span.objects.filter(run_id=own_id).count()
    finally:
        for process in processes:
            stop(process)
        if not args.keep_db:
            _common.database_drop(DB_NAME)

    rows = []
    for mode, results in (
        ("non-streaming (whole call)", plain),
        ("streaming (first token)", streamed),
    ):
        for path, result in results.items():
            rows.append(
                [
                    f"{mode}, {path}",
                    *(
                        f"{value * 1000:.2f}"
                        for value in (
                            percentile(result["direct"], 0.5),
                            percentile(result["router"], 0.5),
                            result["added_p50"],
                            percentile(result["direct"], 0.95),
                            percentile(result["router"], 0.95),
                            result["added_p95"],
                            result["paired_median"],
                            result["cpu_direct"],
                            result["cpu_router"],
                        )
                    ),
                ]
            )
    header = ["ms", "direct p50", "router p50", "added p50", "direct p95", "router p95"]
    header += ["added p95", "paired median", "upstream CPU/call", "router CPU/call"]
    print(f"{args.calls} calls each way, one at a time, after {WARMUP} warm-up calls")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after (a shared machine adds to every round trip)"
    )
    print(table(rows, header))
    for path in plain:
        worst = max(plain[path]["added_p50"], streamed[path]["added_p50"]) * 1000
        verdict = "PASS" if worst <= TARGET_ADDED_MS else "MISS"
        print(
            f"{path}: p50 added latency {worst:.2f} ms: {verdict} (target <= {TARGET_ADDED_MS} ms)"
        )
    for path, result in concurrency.items():
        errors = result["errors"]
        print(
            f"{path}: {args.streams} concurrent streams through one uvicorn process: "
            f"{args.streams - len(errors)} complete, {len(errors)} errors, "
            f"wall {result['wall']:.2f} s (each stream ~{STREAM_WORDS * 0.05:.1f} s): "
            + ("PASS" if not errors else "MISS")
        )
        for error in errors[:5]:
            print(f"  {error}")
    if args.profile:
        print_profile(workdir / "profile.txt")
    total_calls = 2 * (args.calls + WARMUP) + args.streams
    print(
        f"covered run after the bench: {spans} spans (calls made: {total_calls}), "
        f"reserved {run.covered_reserved_micros}, spent {run.covered_spent_micros} micro-dollars"
    )
    print(f"own-key run after the bench: {own_spans} spans (calls made: {total_calls})")
    consistent = spans == own_spans == total_calls and run.covered_reserved_micros == 0
    if not consistent:
        print("ERROR: the run's spans or reservations do not add up")
    return 0 if consistent else 1


if __name__ == "__main__":
    sys.exit(main())
