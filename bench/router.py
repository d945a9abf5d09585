"""The model router's overhead: what it adds over calling the upstream directly, and 100
concurrent streams through one server process.

    .venv/bin/python bench/router.py [--calls 300] [--streams 100] [--keep-db]

* Upstream: the tests' local OpenAI-compatible server (tests/router/fake_upstream.py) in a
  process of its own on 127.0.0.1: a 5-word answer with usage, at once (the latency phases),
  and a second one streaming 20 words 50 ms apart (the concurrency phase).
* Router: `uvicorn belvedir.asgi:application`, ONE process, DEBUG off, on PostgreSQL
  database `belvedir_bench_router` (dropped and created at start, dropped at the end), with a
  covered model in the catalog and a running covered run whose key the calls use. Every
  call is admitted (key, run, price), reserved, forwarded, settled and recorded as a span.
* Latency: --calls non-streaming calls and --calls streaming calls, one at a time over
  keep-alive connections, alternating direct and through the router (after 20 warm-up calls
  of each). Non-streaming: the whole call; streaming: time to the first content event.
  Added latency = router minus direct, at p50 and p95 (and the median of paired differences).
  Also the CPU time per call of the upstream's and the router's process (all threads, the
  router's batched settlements included), which a loaded machine inflates far less than
  the wall-clock figures.
* Concurrency: --streams streams started at once through the router (asyncio, httpx), each
  20 words over ~1 s; every stream must finish with its whole text and `[DONE]`; afterwards
  the run's spend must be exactly the streams' cost with nothing left reserved.

Prints the figures and PASS/MISS against the targets (p50 added latency <= 3 ms, 100
concurrent streams with no errors). Exits 0 unless something errored.
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


def covered_run() -> tuple[str, str]:
    """A running covered run with a large cap in a fresh organization; (run id, run key)."""
    from belvedir import crypto, services
    from belvedir.models import ApiKey, Membership
    from models_registry.models import CoveredModel, Lab
    from runs.models import Run

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
    run = Run.objects.create(
        project=project,
        harness_name="bench",
        status="running",
        model=MODEL,
        covered=True,
        model_covered=True,
        covered_cap_micros=10**12,
    )
    run.ingest_key, key = services.api_key_create(
        project=project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.run_key_encrypted = crypto.encrypt(key)
    run.save(update_fields=["ingest_key", "run_key_encrypted"])
    return run.pk, key


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


def latency(
    direct: str, router: str, key: str, calls: int, stream: bool, pids: tuple[int, int]
) -> dict:
    import httpx

    with httpx.Client(timeout=30) as to_direct, httpx.Client(timeout=30) as to_router:
        for _ in range(WARMUP):
            one_call(to_direct, direct, "sk-bench", stream)
            one_call(to_router, router, key, stream)
        direct_times, router_times = [], []
        cpu_before = [cpu_seconds(pid) for pid in pids]
        for i in range(calls):
            pair = [
                (to_direct, direct, "sk-bench", direct_times),
                (to_router, router, key, router_times),
            ]
            for http, url, k, out in pair if i % 2 == 0 else pair[::-1]:
                out.append(one_call(http, url, k, stream))
        time.sleep(0.5)  # the last settlements (written in batches, after the answers)
        cpu = [
            (cpu_seconds(pid) - before) / calls
            for pid, before in zip(pids, cpu_before, strict=True)
        ]
    paired = [r - d for r, d in zip(router_times, direct_times, strict=True)]
    return {
        "direct": direct_times,
        "router": router_times,
        "added_p50": percentile(router_times, 0.5) - percentile(direct_times, 0.5),
        "added_p95": percentile(router_times, 0.95) - percentile(direct_times, 0.95),
        "paired_median": statistics.median(paired),
        "cpu_direct": cpu[0],
        "cpu_router": cpu[1],
    }


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

        profiler = py_spy(router.pid, 600, workdir / "profile.txt") if args.profile else None
        if profiler:
            time.sleep(1.0)  # let py-spy attach
        pids = (fast.pid, router.pid)
        plain = latency(direct, router_url, key, args.calls, stream=False, pids=pids)
        streamed = latency(direct, router_url, key, args.calls, stream=True, pids=pids)
        if profiler:
            profiler.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            profiler.wait(timeout=30)
        stop(router)
        slow_direct = f"http://127.0.0.1:{slow_port}/v1"
        router, router_port = start(
            uvicorn,
            {**server_env, "BELVEDIR_ROUTER_UPSTREAM_BASE": slow_direct},
            workdir / "router-streams.log",
        )
        processes.append(router)
        concurrency = asyncio.run(
            concurrent_streams(f"http://127.0.0.1:{router_port}/api/v1", key, args.streams)
        )
        stop(router)  # a SIGTERM: the server writes the settlements still pending, then exits
        from runs.models import Run
        from traces.models import Span

        run = Run.objects.get(pk=run_id)
        spans = Span.objects.filter(run=run).count()
    finally:
        for process in processes:
            stop(process)
        if not args.keep_db:
            _common.database_drop(DB_NAME)

    rows = []
    for name, result in (
        ("non-streaming (whole call)", plain),
        ("streaming (first token)", streamed),
    ):
        rows.append(
            [
                name,
                f"{percentile(result['direct'], 0.5) * 1000:.2f}",
                f"{percentile(result['router'], 0.5) * 1000:.2f}",
                f"{result['added_p50'] * 1000:.2f}",
                f"{percentile(result['direct'], 0.95) * 1000:.2f}",
                f"{percentile(result['router'], 0.95) * 1000:.2f}",
                f"{result['added_p95'] * 1000:.2f}",
                f"{result['paired_median'] * 1000:.2f}",
                f"{result['cpu_direct'] * 1000:.2f}",
                f"{result['cpu_router'] * 1000:.2f}",
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
    worst = max(plain["added_p50"], streamed["added_p50"]) * 1000
    verdict = "PASS" if worst <= TARGET_ADDED_MS else "MISS"
    print(f"p50 added latency {worst:.2f} ms: {verdict} (target <= {TARGET_ADDED_MS} ms)")
    errors = concurrency["errors"]
    print(
        f"{args.streams} concurrent streams through one uvicorn process: "
        f"{args.streams - len(errors)} complete, {len(errors)} errors, "
        f"wall {concurrency['wall']:.2f} s (each stream ~{STREAM_WORDS * 0.05:.1f} s): "
        + ("PASS" if not errors else "MISS")
    )
    for error in errors[:5]:
        print(f"  {error}")
    if args.profile:
        print_profile(workdir / "profile.txt")
    total_calls = 2 * (args.calls + WARMUP) + args.streams
    print(
        f"run after the bench: {spans} spans (calls made: {total_calls}), "
        f"reserved {run.covered_reserved_micros}, spent {run.covered_spent_micros} micro-dollars"
    )
    consistent = spans == total_calls and run.covered_reserved_micros == 0
    if not consistent:
        print("ERROR: the run's spans or reservations do not add up")
    return 0 if consistent else 1


if __name__ == "__main__":
    sys.exit(main())
