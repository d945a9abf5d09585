"""Queue pick-up and launch-to-succeeded through the API and a real queue cluster.

    .venv/bin/python bench/queue_pickup.py [--runs 7] [--brokers redis orm]
        [--runtimes runc runsc] [--redis-url redis://127.0.0.1:6379/13] [--app-dir DIR]
        [--keep-db] [--keep-logs DIR]

The trivial harness of bench/run_overhead.py (install `true`; a one-line python3 writes
results.json = {"score": 1}) in a local git repository. Per broker (Redis, and django-q2's
ORM broker for comparison) the platform is served as in production: the web app under
uvicorn (`belvedir.asgi`, one process) and the runs cluster (`Q_CLUSTER_NAME=runs manage.py
qcluster`, its own process group), both on PostgreSQL database `belvedir_bench_queue`, the
Redis broker on --redis-url (its own database number, so other users of the server are not
touched). Per runtime the cluster is started with BELVEDIR_SANDBOX_RUNTIME set to it.

* platform: POST /api/v1/runs with a project key, then GET /api/v1/runs/<id> every 20 ms
  until it reads succeeded (score 1). Measured:
  - claim: from the launch's response arriving to the run's `started_at`, which the worker's
    claim sets (`runs.services.run_claim`, the atomic queued → running update);
  - launch → succeeded: from sending the POST to the GET that first reads succeeded.
  Also the split: the POST itself, claim, claim → `finished_at` (the worker's run_finish),
  and finished → seen by the client (the 20 ms polling).
* baseline: the same clone and command by hand (bench/run_overhead.py's baseline: `git clone
  --depth 1`, `docker run` with the platform's flags and limits on the sandbox network, the
  clone bind-mounted, read results.json, `docker rm`), alternating with the platform runs.

Targets (issue 14, with the Redis broker): claim median <= 100 ms; launch -> succeeded median
<= 600 ms. Exits 0 unless something errored (a MISS is a finding). --app-dir serves another
checkout with the same schema (web app and cluster); --compare DIR serves DIR as well (its
own server, cluster and Redis database: the next number), its runs interleaved with the
others', so before and after are measured in one machine state on a shared machine:
`mkdir /tmp/head && git archive HEAD | tar -x -C /tmp/head`, then `--compare /tmp/head`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common
import run_overhead
from _common import median, table

DB_NAME = "belvedir_bench_queue"
TARGET_CLAIM_S = 0.100
TARGET_TOTAL_S = 0.600
POLL_S = 0.020
RUN_CAP_S = 60  # one run may take this long before the benchmark gives up on it
TIME_CAP_S = 420  # no new rounds start after this
VENV_BIN = Path(sys.executable).parent
INSTANCES: dict[Path, str] = {}  # with --compare: each checkout's own sandbox instance


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


class Process:
    """A server or cluster in its own process group, logging to a file."""

    def __init__(self, name: str, command: list[str], env: dict, cwd: Path, log: Path):
        self.name, self.log_path = name, log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_for(self, ready, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} did not start:\n{self.log_path.read_text()[-3000:]}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                return


def platform_env(database_url: str, broker: str, redis_url: str, app_dir: Path) -> dict:
    """A checkout's environment; with --compare each has a sandbox instance of its own (its
    label), so the two clusters never take each other's warm sandboxes."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        "PYTHONPATH": str(app_dir),
        "DEBUG": "0",
        "BELVEDIR_DEV": "1",  # plain HTTP on 127.0.0.1, file:// repos
        "BELVEDIR_SANDBOX_BASE_URL": "http://172.30.0.1:9",  # no Tasks: never contacted
        "BELVEDIR_RUN_TIMEOUT": "120",
        "BELVEDIR_RUNS_PER_DAY_CAP": "10000",
        "Q_WORKERS": "2",
    }
    env.pop("REDIS_URL", None)
    if instance := INSTANCES.get(app_dir):
        env["BELVEDIR_INSTANCE"] = instance
    if broker == "redis":
        env["REDIS_URL"] = redis_url
    return env


def start_server(env: dict, app_dir: Path, tmp: Path, tag: str) -> tuple[Process, str]:
    import requests

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = Process(
        f"uvicorn ({tag})",
        [
            str(VENV_BIN / "uvicorn"), "belvedir.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--no-access-log", "--log-level", "warning",
        ],
        {**env, "LOG_LEVEL": "WARNING"}, app_dir, tmp / f"uvicorn-{tag}.log",
    )  # fmt: skip

    def answers() -> bool:
        try:
            requests.get(f"{url}/api/v1/runs", timeout=2)  # 401/403: it answers
            return True
        except requests.ConnectionError:
            return False

    server.wait_for(answers)
    return server, url


def start_cluster(env: dict, app_dir: Path, tmp: Path, tag: str, runtime: str) -> Process:
    log = tmp / f"qcluster-{tag}-{runtime}.log"
    cluster = Process(
        f"qcluster ({tag}, {runtime})",
        [sys.executable, "manage.py", "qcluster"],
        {**env, "Q_CLUSTER_NAME": "runs", "BELVEDIR_SANDBOX_RUNTIME": runtime, "LOG_LEVEL": "INFO"},
        app_dir,
        log,
    )
    cluster.wait_for(lambda: b"running." in log.read_bytes())
    time.sleep(1.0)  # settled: the workers are waiting
    return cluster


def warm_starts(log: Path, label: str, runs: int) -> None:
    """How many of a cluster's runs took a warm sandbox (sandboxes/warm.py), from its log."""
    text = log.read_text(errors="replace") if log.exists() else ""
    warm, cold = text.count("takes the warm sandbox"), text.count("no warm sandbox for run")
    if warm or cold:
        print(
            f"{label or 'platform'}: {warm} warm starts, {cold} cold (pool empty), {runs + 1} runs"
        )


def drain_warm_pools() -> None:
    """Remove the warm sandboxes the clusters left on this engine (every shape of each
    platform instance served: the database is dropped next)."""
    from django.conf import settings

    from belvedir.sandbox_config import get_backend

    for instance in {*INSTANCES.values(), settings.BELVEDIR_INSTANCE}:
        settings.BELVEDIR_INSTANCE = instance  # "": the one the database names
        pool = getattr(get_backend(), "pool", None)
        if pool is not None:
            pool.drain()
            # Taken by a run, left by its cluster stopped before the removal.
            for _, item in pool.listed_claimed({}):
                pool.remove(item["Id"])


def platform_once(http, url: str, harness_id: str) -> dict[str, float]:
    from runs.models import Run

    t0 = time.time()
    answer = http.post(f"{url}/api/v1/runs", json={"harness": harness_id}, timeout=30)
    t1 = time.time()
    if answer.status_code != 201:
        raise RuntimeError(f"launch answered {answer.status_code}: {answer.text[:500]}")
    run_id = answer.json()["id"]
    status = "queued"
    while time.time() - t0 < RUN_CAP_S:
        body = http.get(f"{url}/api/v1/runs/{run_id}", timeout=30).json()
        status = body["status"]
        if status not in ("queued", "running"):
            break
        time.sleep(POLL_S)
    t2 = time.time()
    run = Run.objects.get(pk=run_id)
    if status != "succeeded" or run.score != 1.0:
        raise RuntimeError(f"run {run_id} ended {status}: {run.notes} {run.log_tail[-500:]}")
    claimed, finished = run.started_at.timestamp(), run.finished_at.timestamp()
    return {
        "claim": claimed - t1,
        "total": t2 - t0,
        "POST /api/v1/runs": t1 - t0,
        "claimed -> finished_at (the worker)": finished - claimed,
        "finished_at -> seen (polling)": t2 - finished,
    }


def print_broker(tag: str, runtime: str, platform: list[dict], baseline: list[dict]) -> list:
    claim = [r["claim"] for r in platform]
    total = [r["total"] for r in platform]
    base = [r["total"] for r in baseline]
    rows = [
        ["claim (launch response -> worker's claim)", claim],
        ["launch -> succeeded through the API", total],
        *[[k, [r[k] for r in platform]] for k in platform[0] if k not in ("claim", "total")],
        ["plain docker run path (clone + docker run -v)", base],
    ]
    print(f"\n===== broker {tag}, runtime {runtime}: {len(platform)} runs each (ms) =====")
    print(
        table(
            [[name, f"{median(v) * 1000:.0f}", f"{p95(v) * 1000:.0f}", f"{min(v) * 1000:.0f}",
              f"{max(v) * 1000:.0f}"] for name, v in rows],
            ["", "median", "p95", "min", "max"],
        )
    )  # fmt: skip
    verdicts = []
    for what, value, target in (
        ("claim median", median(claim), TARGET_CLAIM_S),
        ("launch -> succeeded median", median(total), TARGET_TOTAL_S),
    ):
        verdict = "PASS" if value <= target else "MISS"
        verdicts.append(verdict)
        print(f"{what}: {value * 1000:.0f} ms (target {target * 1000:.0f} ms) -> {verdict}")
    print(
        f"launch -> succeeded over the plain docker run: {(median(total) - median(base)) * 1000:.0f} ms"
    )
    return [tag, runtime, f"{median(claim) * 1000:.0f}", f"{p95(claim) * 1000:.0f}",
            f"{median(total) * 1000:.0f}", f"{p95(total) * 1000:.0f}",
            f"{median(base) * 1000:.0f}", f"{p95(base) * 1000:.0f}", *verdicts]  # fmt: skip


def redis_clear(redis_url: str) -> None:
    import redis

    connection = redis.from_url(redis_url)
    connection.delete("django_q:runs:q", *connection.keys("belvedir:run-task:*"))


def next_db(redis_url: str) -> str:
    """The same Redis server, the next database number: a second checkout's own queue."""
    base, _, number = redis_url.rpartition("/")
    return f"{base}/{int(number) + 1}" if number.isdigit() else f"{redis_url.rstrip('/')}/1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="measured runs per path (default 7)")
    parser.add_argument("--brokers", nargs="+", default=["redis", "orm"], choices=["redis", "orm"])
    parser.add_argument("--runtimes", nargs="+", default=["runc", "runsc"])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--app-dir", type=Path, default=_common.ROOT)
    parser.add_argument(
        "--compare",
        type=Path,
        help="also serve this checkout (same schema; its own cluster and Redis database), "
        "its runs interleaved with --app-dir's: before/after in one machine state (Redis only)",
    )
    parser.add_argument("--keep-db", action="store_true", help=f"keep database {DB_NAME}")
    parser.add_argument(
        "--keep-logs", type=Path, help="copy the servers' and clusters' logs into this folder"
    )
    args = parser.parse_args()
    if args.compare and args.brokers != ["redis"]:
        parser.error("--compare needs --brokers redis (two clusters would share the ORM queue)")
    if shutil.which("docker") is None:
        print("docker is not installed", file=sys.stderr)
        return 1
    # (label, checkout, Redis database) of each platform measured side by side.
    targets = [("", args.app_dir.resolve(), args.redis_url)]
    if args.compare:
        targets = [
            ("after", args.app_dir.resolve(), args.redis_url),
            ("before", args.compare.resolve(), next_db(args.redis_url)),
        ]
        INSTANCES.update({path: f"bench-queue-{label}-{os.getpid()}" for label, path, _ in targets})

    tmp = Path(tempfile.mkdtemp(prefix="belvedir-bench-queue-"))
    processes: list[Process] = []
    url = _common.database_recreate(DB_NAME)
    try:
        _common.django_setup(url, BELVEDIR_SANDBOX_IMAGE=run_overhead.IMAGE)
        import requests
        from django.db import connection

        from belvedir.models import Membership
        from belvedir.services import api_key_create, user_signup
        from harnesses.services import harness_create

        run_overhead.sh(["docker", "image", "inspect", run_overhead.IMAGE])
        if "redis" in args.brokers:
            for _, _, redis_url in targets:
                redis_clear(redis_url)
        user = user_signup(
            email="bench@example.com", password="bench-password-1", organization_name="Bench"
        )
        project = Membership.objects.get(user=user).organization.projects.get()
        _, key = api_key_create(project=project, name="bench", created_by=user)
        repo_url = run_overhead.make_harness_repo(tmp)
        harness = harness_create(
            project=project,
            name="trivial",
            repo_url=repo_url,
            install_command=run_overhead.INSTALL,
            run_command=run_overhead.RUN,
            created_by=user,
        )
        connection.close()
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {key}"
        serving = ", ".join(f"{label or 'serving'} {path}" for label, path, _ in targets)
        print(f"{serving}; brokers {args.brokers}, runtimes {args.runtimes}", flush=True)

        summary, started = [], time.monotonic()
        for broker in args.brokers:
            bases, servers = {}, []
            for label, app_dir, redis_url in targets:
                env = platform_env(url, broker, redis_url, app_dir)
                server, bases[label] = start_server(env, app_dir, tmp, f"{broker}{label}")
                servers.append(server)
            processes.extend(servers)
            for runtime in args.runtimes:
                if time.monotonic() - started > TIME_CAP_S:
                    print(f"time cap of {TIME_CAP_S} s reached", file=sys.stderr)
                    break
                clusters = []
                for label, app_dir, redis_url in targets:
                    env = platform_env(url, broker, redis_url, app_dir)
                    clusters.append(start_cluster(env, app_dir, tmp, f"{broker}{label}", runtime))
                processes.extend(clusters)
                platform: dict[str, list[dict]] = {label: [] for label, _, _ in targets}
                baseline: list[dict] = []
                for i in range(args.runs + 1):
                    steps = [
                        (label, lambda b=bases[label]: platform_once(http, b, harness.pk))
                        for label, _, _ in targets
                    ]
                    steps.append(
                        (
                            "docker",
                            lambda i=i, rt=runtime: run_overhead.baseline_once(
                                repo_url, tmp, i, rt
                            ),
                        )
                    )
                    shift = i % len(steps)  # each path goes first in turn
                    results = {label: step() for label, step in steps[shift:] + steps[:shift]}
                    b = results["docker"]
                    line = "  ".join(
                        f"{label or 'platform'}: claim {results[label]['claim'] * 1000:5.0f} ms, "
                        f"launch->succeeded {results[label]['total'] * 1000:5.0f} ms"
                        for label, _, _ in targets
                    )
                    print(
                        f"{'warm-up' if i == 0 else f'run {i}':>8} {broker:>5} {runtime:>5}: {line}"
                        f"  docker run path {b['total'] * 1000:5.0f} ms",
                        flush=True,
                    )
                    if i > 0:
                        for label, _, _ in targets:
                            platform[label].append(results[label])
                        baseline.append(b)
                for cluster in clusters:
                    cluster.stop()
                for label, _, _ in targets:
                    warm_starts(tmp / f"qcluster-{broker}{label}-{runtime}.log", label, args.runs)
                for label, _, _ in targets:
                    tag = f"{broker} {label}".strip()
                    summary.append(print_broker(tag, runtime, platform[label], baseline))
            for server in servers:
                server.stop()
        print("\nSide by side (ms):")
        print(
            table(
                summary,
                ["broker", "runtime", "claim p50", "claim p95", "launch->succeeded p50",
                 "p95", "docker run p50", "p95", "claim <= 100", "total <= 600"],
            )
        )  # fmt: skip
        return 0
    finally:
        for process in processes:
            process.stop()
        try:
            from runs.models import Run

            run_overhead.cleanup_containers(list(Run.objects.values_list("pk", flat=True)))
            drain_warm_pools()
        except Exception as exc:  # report, keep cleaning
            print(f"cleanup: {exc}", file=sys.stderr)
        if "redis" in args.brokers:
            for _, _, redis_url in targets:
                redis_clear(redis_url)
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for path in tmp.glob("*.log"):
                shutil.copy(path, args.keep_logs)
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep_db:
            _common.database_drop(DB_NAME)


if __name__ == "__main__":
    sys.exit(main())
