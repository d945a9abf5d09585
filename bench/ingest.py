"""Trace ingest throughput: spans/s stored through POST /api/v1/traces by the web processes.

    .venv/bin/python bench/ingest.py [--batches 200] [--sessions 10] [--clients 4] [--workers 2]
                                     [--server uvicorn|gunicorn] [--threads 4] [--profile]
                                     [--keep-db] [--app-dir DIR]

* Payloads: the SDK-captured body tests/traces/fixtures/sdk_batch.json (docs/sdk-wire-format.md),
  its 8 spans (4 LLM calls: 2 current-format openai.chat with messages, 2 indexed-format raw
  HTTP chats; 3 workflow spans; 1 requests http span) replicated into OTLP/JSON batches of 100
  spans with fresh unique hex trace/span ids (parents remapped), current timestamps, one
  resource and one scope entry per instrumentation library, as the SDK's exporter sends them,
  spread round-robin over --sessions sessions (10 by default, so each session accumulates
  thousands of spans during the run).
* Parse-only rate: `traces.otlp.decode_request` + `parse_llm_call` + `session_id_of` per span
  over the same payloads, in this process, before the server starts and again after the
  stored phase (both printed; the ratio uses the two passes together).
* Stored rate: the app served as production serves it (docs/operating.md, "Serving in production"):
  `uvicorn belvedir.asgi:application --workers N` (ingest runs in a pool of threads per
  process, belvedir/asgi.py); --server gunicorn serves belvedir.wsgi with gthread workers
  (--threads) instead. --workers processes, 2 by default (one per core of this machine;
  --workers 1 measures one process), on 127.0.0.1, DEBUG off, PostgreSQL database `belvedir_bench_ingest` (dropped and created at
  start, dropped at the end); --clients threads POST the batches over keep-alive
  connections (http.client) with a project key. 10 warm-up batches first, then --batches timed ones
  (a 120 s cap). Afterwards the database must hold exactly the spans sent (else it is an
  error); whether the sessions' span counts add up to it is reported (a product check).

Prints stored spans/s, parse-only spans/s, their ratio, PASS/MISS against 8,000 spans/s stored and
a ratio of 0.5, the rate per quarter of the run (does it slow down as sessions grow?), CPU use of
the workers, their
PostgreSQL backends and everything else (this machine is often shared, which lowers the rate),
and the CPU cost per batch with the ceiling it implies on an idle machine. --profile runs
py-spy (GIL-holding samples) on one worker during the timed phase and prints where the time
goes. --app-dir serves another checkout with the same schema (e.g. `git archive HEAD | tar -x
-C /tmp/head`) to compare before/after. Exits 0 unless something errored (a non-200 answer
after retries, a wrong span count, the server not starting).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _common
from _common import table
from _ingest_data import SPANS_PER_BATCH, make_payloads, mix_of, parse_only
from _profile import print_profile, py_spy

DB_NAME = "belvedir_bench_ingest"
TARGET = 8000
TARGET_RATIO = 0.5
WARMUP_BATCHES = 10
TIME_CAP_S = 120
VENV_BIN = Path(sys.executable).parent


# --- server --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """gunicorn (WSGI, gthread) with `workers` worker processes, in its own process group; or
    uvicorn (ASGI, as docs/operating.md's "Serving in production" and `make up` run the app), whose
    workers each run Django's sync views in one thread (`threads` does not apply)."""

    def __init__(
        self,
        database_url: str,
        threads: int,
        log_path: Path,
        app_dir: Path = _common.ROOT,
        workers: int = 1,
        server: str = "gunicorn",
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        }
        self.log = open(log_path, "wb")  # noqa: SIM115 (closed in stop)
        if server == "uvicorn":
            command = [
                str(VENV_BIN / "uvicorn"), "belvedir.asgi:application", "--workers", str(workers),
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
                "--no-access-log",
            ]  # fmt: skip
        else:
            command = [
                str(VENV_BIN / "gunicorn"), "belvedir.wsgi", "--workers", str(workers),
                "--threads", str(threads), "--bind", f"127.0.0.1:{self.port}",
                "--log-level", "warning", "--timeout", "60",
            ]  # fmt: skip
        self.proc = subprocess.Popen(
            command,
            cwd=app_dir, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self.log_path = log_path

    def wait_ready(self, timeout: float = 60) -> None:
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log_path.read_text()[-2000:]}")
            try:
                requests.get(f"{self.url}/api/v1/traces", timeout=2)  # 405: it answers
                return
            except (requests.ConnectionError, requests.Timeout):  # still booting (busy machine)
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer within {timeout:.0f} s")

    def worker_pids(self) -> list[int]:
        """The worker processes (uvicorn with one worker serves from its main process)."""
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            pids = [int(pid) for pid in children.split()]
        except (OSError, ValueError):
            return []
        # uvicorn's multiprocessing also starts a resource tracker: not a worker.
        workers = [pid for pid in pids if "resource_tracker" not in _cmdline(pid)]
        return workers or [self.proc.pid]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=5)
        self.log.close()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies over all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def postgres_backends() -> list[int]:
    """Process ids of the PostgreSQL backends serving the bench database (the web workers')."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [DB_NAME],
        )
        pids = [row[0] for row in cursor.fetchall()]
    connection.close()
    return pids


# --- load ----------------------------------------------------------------------------------


class Load:
    """Client threads POSTing batches over keep-alive connections. Plain http.client (the
    load generator shares the machine it measures: requests took ~2.5x the CPU per batch)."""

    def __init__(self, url: str, key: str, clients: int):
        self.host, self.port = url.removeprefix("http://").split(":")
        self.path = "/api/v1/traces"
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        self.clients = clients
        self.local = threading.local()
        self.retries = 0
        self.lock = threading.Lock()

    def connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        if fresh or not hasattr(self.local, "connection"):
            if hasattr(self.local, "connection"):
                self.local.connection.close()
            self.local.connection = http.client.HTTPConnection(self.host, int(self.port), 60)
        return self.local.connection

    def post(self, payload: bytes) -> float:
        """POST one batch; the time it was answered. Raises on anything but a clean 200."""
        for attempt in range(5):
            try:
                conn = self.connection()
                conn.request("POST", self.path, body=payload, headers=self.headers)
                response = conn.getresponse()
                body = response.read()
            except (http.client.HTTPException, ConnectionError):
                # A keep-alive connection the server closed (gunicorn's keepalive is 2 s,
                # e.g. while this thread slept on a Retry-After): once more on a new one.
                self.connection(fresh=True)
                if attempt == 4:
                    raise
                continue
            if response.status == 503 and attempt < 4:
                with self.lock:
                    self.retries += 1
                self.connection(fresh=True)  # the sleep below outlasts gunicorn's keep-alive
                time.sleep(float(response.getheader("Retry-After") or "1"))
                continue
            break
        done = time.perf_counter()
        if response.status != 200:
            raise RuntimeError(f"ingest answered {response.status}: {body[:300]!r}")
        partial = (json.loads(body or b"null") or {}).get("partialSuccess") or {}
        if int(partial.get("rejectedSpans") or 0):
            raise RuntimeError(f"ingest rejected spans: {partial}")
        return done

    def run(self, payloads: list[bytes], cap_s: float) -> tuple[float, list[float], int]:
        """(elapsed, answer times relative to the start, batches sent) under a time cap."""
        started = time.perf_counter()
        deadline = started + cap_s
        answered: list[float] = []
        feed = iter(payloads)
        feed_lock = threading.Lock()

        def worker() -> None:
            while time.perf_counter() < deadline:
                with feed_lock:
                    payload = next(feed, None)
                if payload is None:
                    return
                at = self.post(payload)
                with feed_lock:
                    answered.append(at - started)

        with ThreadPoolExecutor(self.clients) as pool:
            for future in [pool.submit(worker) for _ in range(self.clients)]:
                future.result()
        return time.perf_counter() - started, sorted(answered), len(answered)


# --- main ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="timed batches (default 200)")
    parser.add_argument("--sessions", type=int, default=10, help="sessions the spans go to")
    parser.add_argument("--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument(
        "--server", choices=["uvicorn", "gunicorn"], default="uvicorn",
        help="uvicorn (ASGI, as production and make up serve; the default) or gunicorn gthread",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="py-spy the worker")
    parser.add_argument("--keep-db", action="store_true", help=f"keep database {DB_NAME}")
    parser.add_argument(
        "--app-dir",
        type=Path,
        default=_common.ROOT,
        help="serve another checkout of the project (same schema), e.g. to compare before/after",
    )
    args = parser.parse_args()
    if not (VENV_BIN / args.server).exists():
        print(
            f"{args.server} is not installed in {VENV_BIN.parent}: "
            f"{VENV_BIN / 'pip'} install {args.server}",
            file=sys.stderr,
        )
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="belvedir-bench-ingest-"))
    server: Server | None = None
    url = _common.database_recreate(DB_NAME)
    try:
        _common.django_setup(url)
        from django.db import connection
        from django.db.models import Sum

        from belvedir.models import Membership
        from belvedir.services import api_key_create, user_signup
        from traces.models import Session, Span

        user = user_signup(
            email="bench@example.com", password="bench-password-1", organization_name="Bench"
        )
        project = Membership.objects.get(user=user).organization.projects.get()
        _, key = api_key_create(project=project, name="bench", created_by=user)
        connection.close()

        payloads = make_payloads(WARMUP_BATCHES + args.batches, args.sessions)
        warmup, timed = payloads[:WARMUP_BATCHES], payloads[WARMUP_BATCHES:]
        mix = mix_of(timed[0])
        size = sum(map(len, timed)) / len(timed)
        print(
            f"payloads: {len(timed)} batches of {SPANS_PER_BATCH} spans "
            f"({mix['llm']} LLM, {mix['workflow']} workflow, {mix['other']} http per batch), "
            f"{size / 1024:.0f} KB each, over {args.sessions} sessions; +{WARMUP_BATCHES} warm-up"
        )
        parse_only(warmup)  # imports and caches
        parse_cpu = time.process_time()
        parse_first, _ = parse_only(timed)
        parse_ms = 1000 * (time.process_time() - parse_cpu) / len(timed)  # CPU per batch
        print(f"parse-only: {parse_first:,.0f} spans/s (one thread, this process)", flush=True)

        server = Server(
            url, args.threads, tmp / "server.log", args.app_dir.resolve(), args.workers,
            args.server,
        )  # fmt: skip
        server.wait_ready()
        load = Load(server.url, key, args.clients)
        load.run(warmup, TIME_CAP_S)
        workers = server.worker_pids()
        profiler = None
        if args.profile and workers:
            profiler = py_spy(workers[0], TIME_CAP_S, tmp / "profile.txt")
            time.sleep(1.0)  # let py-spy attach
        pg_before = {pid: cpu_seconds(pid) for pid in postgres_backends()}
        cpu0, busy0, own0 = sum(map(cpu_seconds, workers)), machine_busy(), os.times()
        elapsed, answered, sent = load.run(timed, TIME_CAP_S)
        cpu1, busy1, own1 = sum(map(cpu_seconds, workers)), machine_busy(), os.times()
        # A worker thread that took its first request during the timed phase opened its
        # connection then: its backend's CPU counts from zero (all of it is this phase's).
        backends = postgres_backends()
        pg_after = {pid: cpu_seconds(pid) for pid in backends}
        pg0 = sum(pg_before.get(pid, 0.0) for pid in pg_after)
        pg1 = sum(pg_after.values())
        pg_new = len(pg_after.keys() - pg_before.keys())
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            try:
                profiler.wait(timeout=30)
            except subprocess.TimeoutExpired:
                profiler.kill()

        # The same parse again after the stored phase: one pass swung 17,000-27,000 spans/s
        # between runs minutes apart on a quiet machine; the ratio's rate is both passes' mean.
        parse_cpu = time.process_time()
        parse_second, _ = parse_only(timed)
        parse_ms = (parse_ms + 1000 * (time.process_time() - parse_cpu) / len(timed)) / 2
        parse_rate = 2 / (1 / parse_first + 1 / parse_second)  # the same spans, twice
        print(f"parse-only again: {parse_second:,.0f} spans/s; both: {parse_rate:,.0f}")
        expected = (WARMUP_BATCHES + sent) * SPANS_PER_BATCH
        stored = Span.objects.count()
        counted = Session.objects.aggregate(n=Sum("span_count"))["n"] or 0
        sessions = Session.objects.count()
        connection.close()
        if stored != expected or sessions != args.sessions:
            print(
                f"ERROR: expected {expected} spans in {args.sessions} sessions; the database holds "
                f"{stored} spans in {sessions} sessions",
                file=sys.stderr,
            )
            return 1
        # Session.span_count is the platform's own tally; a mismatch is a product bug to report
        # (not a benchmark error): concurrent batches of one session overwrite each other's count.
        count_note = (
            "session span counts add up"
            if counted == expected
            else f"BUT Session.span_count adds up to {counted:,}, not {expected:,} (lost update)"
        )

        rate = sent * SPANS_PER_BATCH / elapsed
        print()
        if sent < len(timed):
            print(f"time cap of {TIME_CAP_S} s reached: {sent} of {len(timed)} batches sent")
        rows = [
            ["stored through POST /api/v1/traces", f"{rate:,.0f}"],
            ["parse-only (decode + parse_llm_call + session_id_of)", f"{parse_rate:,.0f}"],
        ]
        print(table(rows, ["spans per second", "rate"]))
        print()
        threads = f"{args.threads} threads each" if args.server == "gunicorn" else "ASGI"
        print(
            f"{sent * SPANS_PER_BATCH:,} spans in {elapsed:.1f} s by {args.workers} {args.server} "
            f"worker(s) ({threads}), {args.clients} client threads, keep-alive; "
            f"DB verified: {stored:,} spans (incl. warm-up) as sent; {count_note}"
        )
        ratio = rate / parse_rate
        print(
            f"target: at least {TARGET:,} spans/s stored -> {'PASS' if rate >= TARGET else 'MISS'}; "
            f"ratio stored/parse-only {ratio:.2f}, target {TARGET_RATIO} -> "
            f"{'PASS' if ratio >= TARGET_RATIO else 'MISS'}"
        )
        quarters = []
        for q in range(4):
            lo, hi = int(len(answered) * q / 4), int(len(answered) * (q + 1) / 4)
            if hi - lo >= 2:
                start = answered[lo - 1] if lo else 0.0
                quarters.append(f"{(hi - lo) * SPANS_PER_BATCH / (answered[hi - 1] - start):,.0f}")
        spans_per_session = (WARMUP_BATCHES + sent) * SPANS_PER_BATCH // args.sessions
        print(
            f"rate by quarter of the run (sessions grow to ~{spans_per_session:,} spans each): "
            + " -> ".join(quarters)
        )
        busy = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]) * (os.cpu_count() or 1)
        client = (own1.user + own1.system) - (own0.user + own0.system)
        print(
            f"CPU during the timed phase: web workers {100 * (cpu1 - cpu0) / elapsed:.0f}% of a core, "
            f"their {len(backends)} PostgreSQL backends ({pg_new} opened during it) "
            f"{100 * (pg1 - pg0) / elapsed:.0f}%, "
            f"load client {100 * client / elapsed:.0f}%; whole machine {100 * busy:.0f}% "
            f"of {os.cpu_count()} cores, so other processes took "
            f"~{max(0.0, 100 * (busy - (cpu1 - cpu0 + pg1 - pg0 + client) / elapsed)):.0f}%"
        )
        # What one batch costs in CPU, whatever else the machine was doing (this machine is
        # often shared): each web worker can use one core at most (one process, the GIL).
        batches = max(1, sent)
        web_ms = 1000 * (cpu1 - cpu0) / batches
        pg_ms = 1000 * (pg1 - pg0) / batches
        client_ms = 1000 * client / batches
        cores = os.cpu_count() or 1
        ceiling = SPANS_PER_BATCH * min(
            1000 * args.workers / web_ms, 1000 * cores / (web_ms + pg_ms + client_ms)
        )
        idle_parse = SPANS_PER_BATCH * 1000 / parse_ms
        print(
            f"CPU per batch of {SPANS_PER_BATCH}: web workers {web_ms:.1f} ms, PostgreSQL "
            f"{pg_ms:.1f} ms, load client {client_ms:.1f} ms; parse-only {parse_ms:.1f} ms -> on an "
            f"otherwise idle {cores}-core machine about {ceiling:,.0f} spans/s stored at most and "
            f"{idle_parse:,.0f} parse-only, ratio {ceiling / idle_parse:.2f} (estimates from CPU "
            "time, not the measurement above)"
        )
        log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
        deadlocks = log.count("deadlock detected")
        if load.retries or deadlocks:
            print(f"503 answers retried: {load.retries}; deadlocks in the server log: {deadlocks}")
        if args.profile:
            print_profile(tmp / "profile.txt")
        return 0
    except Exception:
        if server is not None and server.log_path.exists():
            tail = server.log_path.read_text(errors="replace")[-3000:]
            print(f"--- the end of the server log ---\n{tail}", file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep_db:
            _common.database_drop(DB_NAME)


if __name__ == "__main__":
    sys.exit(main())
