"""Runs in flight on one host: N runs at once on one runs cluster, and what each one holds.

    .venv/bin/python bench/in_flight.py [--levels 1 4 8] [--hold 30] [--runtime runsc]
                                        [--keep-db]

Per level N: the runs cluster (`Q_CLUSTER_NAME=runs manage.py qcluster`, `Q_WORKERS=N`, the
ORM broker, its own process group) on database `belvedir_bench_in_flight`, and N runs of a
harness that sleeps --hold seconds and then writes results.json (score 1): a harness that
waits on its model calls holds a sandbox and a worker but little CPU. The N runs are launched
at once (`run_launch` in this process, the in-flight cap raised); measured:

* start: from the first launch to each run's command starting (its `running` stage), and to
  the last of the N (how long a burst of N takes to be in flight);
* memory per run in flight: each sandbox's cgroup memory (Docker's stats; under gVisor the
  sandbox's kernel too) and the PSS the cluster's processes grow by while the N run, over N,
  and the idle cluster's PSS in all (its N workers and its own processes, before the runs);
* CPU per run in flight: over 5 s of the hold, the cluster's CPU time (heartbeats every
  second, the log follower) and the sandboxes' (Docker's stats), per run, in % of a core.
  PostgreSQL's share (one heartbeat UPDATE per run per second) is not counted;
* PostgreSQL connections: the database's backends with the cluster idle (this process's one
  left out) and how many more each run in flight holds.

The runs get --disk (1g) of quota volume each, made as each run starts (no spare volumes, no warm sandboxes: every start is cold); the host's disk bound for the default 10 GiB
(free disk less every volume's promised quota and BELVEDIR_MIN_FREE_DISK) is printed instead,
since it, not memory or CPU, is what stops a small host first.

No target: the figures say how many runs a host can hold (docs/scaling.md). The cluster is
stopped and the database dropped at the end (--keep-db keeps it); containers are removed by
the runs' label. Exits 0 unless something errored (a run not succeeding, the cluster not
starting).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common
import run_overhead
from _common import table
from queue_pickup import Process

DB_NAME = "belvedir_bench_in_flight"
SAMPLE_S = 5.0
DEFAULT_DISK = 10 * 2**30  # BELVEDIR_SANDBOX_DISK's default
TICKS = os.sysconf("SC_CLK_TCK")


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def sandbox_stats(client, run_ids: list[str]) -> tuple[list[float], float]:
    """Each sandbox's memory (MB) and the sandboxes' total CPU time (s), from the engine."""
    memory, cpu = [], 0.0
    for run_id in run_ids:
        for container in client.containers.list(filters={"label": f"belvedir.run_id={run_id}"}):
            stats = container.stats(stream=False, one_shot=True)
            memory.append(stats["memory_stats"].get("usage", 0) / 2**20)
            cpu += stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9
    return memory, cpu


def release_volumes(run_ids: list[str]) -> None:
    """The runs' quota volumes that no container uses any more (a run stopped mid-way leaves
    its volume to the reaper's sweep, ten minutes later; until then it counts as promised)."""
    import docker
    from django.conf import settings

    from sandboxes import diskquota, volumes

    data = Path(settings.BELVEDIR_SANDBOX_DATA_DIR)
    containers = docker.from_env().api.containers(all=True, filters={"label": volumes.LABEL_VOLUME})
    used = {(c.get("Labels") or {}).get(volumes.LABEL_VOLUME) for c in containers}
    for name in diskquota.volume_names(root=data):
        if name not in used and any(name.startswith(f"belvedir-{r}-") for r in run_ids):
            volumes.release(data, name)


def disk_bound() -> str:
    """How many sandboxes of the default quota (BELVEDIR_SANDBOX_DISK, 10 GiB) this host's
    disk admits now: every volume's quota is promised, and BELVEDIR_MIN_FREE_DISK kept."""
    from django.conf import settings

    from sandboxes import diskquota

    data = Path(settings.BELVEDIR_SANDBOX_DATA_DIR)
    free = diskquota.free_disk_bytes(data)
    promised = diskquota.committed_bytes(root=data)
    room = free - promised - settings.BELVEDIR_MIN_FREE_DISK
    return (
        f"disk: {free / 2**30:.1f} GiB free, {promised / 2**30:.1f} GiB promised to volumes "
        f"now (spares included), {settings.BELVEDIR_MIN_FREE_DISK / 2**30:.1f} GiB reserve: room "
        f"for {max(0, room) // DEFAULT_DISK} more sandboxes of {DEFAULT_DISK // 2**30} GiB"
    )


def backends() -> int:
    """The cluster's PostgreSQL connections to this database (not this process's own)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def one_level(n: int, args, env: dict, tmp: Path, project, harness, user) -> list[str]:
    import docker

    from runs import services
    from runs.models import TERMINAL, Run, Stage, Status

    log = tmp / f"qcluster-{n}.log"
    cluster = Process(
        f"qcluster (Q_WORKERS={n})",
        [sys.executable, "manage.py", "qcluster"],
        {**env, "Q_WORKERS": str(n)},
        _common.ROOT,
        log,
    )
    run_ids: list[str] = []
    try:
        cluster.wait_for(lambda: b"running." in log.read_bytes())
        time.sleep(2.0)  # settled: the workers are waiting
        idle = pss_mb(group_pids(cluster.proc.pid))
        idle_backends = backends()
        t0 = time.monotonic()
        for _ in range(n):
            run_ids.append(
                services.run_launch(project=project, harness=harness, created_by=user).pk
            )
        started: dict[str, float] = {}
        while len(started) < n:
            if time.monotonic() - t0 > 120 + n * 10:
                raise RuntimeError(
                    f"{n - len(started)} of {n} runs never started:\n{log.read_text()[-3000:]}"
                )
            for run_id, stage, status in Run.objects.filter(pk__in=run_ids).values_list(
                "pk", "stage", "status"
            ):
                if run_id not in started and (
                    stage in (Stage.RUNNING, Stage.COLLECTING) or status in TERMINAL
                ):
                    started[run_id] = time.monotonic() - t0
            time.sleep(0.1)
        print(
            f"{n} runs: commands started after {sorted(round(s, 1) for s in started.values())} s",
            flush=True,
        )
        states = list(Run.objects.filter(pk__in=run_ids).values_list("status", "notes"))
        if [status for status, _ in states].count(Status.RUNNING) != n:
            raise RuntimeError(f"not all {n} runs in flight at once (--hold too short?): {states}")
        client = docker.from_env()
        pids = group_pids(cluster.proc.pid)
        busy = pss_mb(pids)
        busy_backends = backends()
        _, sandbox_cpu0 = sandbox_stats(client, run_ids)
        cluster_cpu0, w0 = cpu_s(pids), time.monotonic()
        time.sleep(SAMPLE_S)
        memory, sandbox_cpu1 = sandbox_stats(client, run_ids)
        cluster_cpu1, seconds = cpu_s(pids), time.monotonic() - w0
        deadline = time.monotonic() + args.hold + 120
        while Run.objects.filter(
            pk__in=run_ids, status__in=[Status.QUEUED, Status.RUNNING]
        ).exists():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"runs still in flight after the hold:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        ended = list(Run.objects.filter(pk__in=run_ids).values_list("status", flat=True))
        if ended.count(Status.SUCCEEDED) != n:
            raise RuntimeError(f"runs ended {ended}: {log.read_text()[-2000:]}")
        starts = sorted(started.values())
        return [
            str(n),
            f"{statistics.median(starts):.1f} / {starts[-1]:.1f}",
            f"{statistics.median(memory):.0f}" if memory else "?",
            f"{(busy - idle) / n:.0f}",
            f"{idle:.0f}",
            f"{idle_backends} + {(busy_backends - idle_backends) / n:.1f}",
            f"{(cluster_cpu1 - cluster_cpu0) / seconds / n * 100:.1f}",
            f"{(sandbox_cpu1 - sandbox_cpu0) / seconds / n * 100:.1f}",
        ]
    finally:
        cluster.stop()
        run_overhead.cleanup_containers(run_ids)
        release_volumes(run_ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--hold", type=int, default=30, help="seconds each run sleeps (30)")
    parser.add_argument("--runtime", default="runsc")
    parser.add_argument(
        "--disk",
        default="1g",
        help="the runs' BELVEDIR_SANDBOX_DISK (1g: the default 10g admits only a few at once "
        "on a small disk, which the benchmark prints instead)",
    )
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    if shutil.which("docker") is None:
        print("docker is not installed", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="belvedir-bench-in-flight-"))
    url = _common.database_recreate(DB_NAME)
    settings = {
        "BELVEDIR_SANDBOX_BASE_URL": "http://172.30.0.1:9",  # no Tasks: never contacted
        "BELVEDIR_SANDBOX_RUNTIME": args.runtime,
        "BELVEDIR_RUN_TIMEOUT": str(args.hold + 120),
        "BELVEDIR_RUNS_PER_DAY_CAP": "10000",
        "BELVEDIR_RUNS_IN_FLIGHT_CAP": "1000",
        "BELVEDIR_SANDBOX_DISK": args.disk,
        # No volumes or sandboxes made ahead: nothing of the benchmark's outlives it (a burst
        # of N runs would find one of each at most anyway), and every start is measured cold.
        "BELVEDIR_SANDBOX_SPARE_VOLUMES": "0",
        "BELVEDIR_SANDBOX_WARM": "0",
    }
    try:
        _common.django_setup(url, **settings)
        from belvedir.models import Membership
        from belvedir.services import user_signup
        from harnesses.services import harness_create

        env = {
            **os.environ,
            **settings,
            "DATABASE_URL": url,
            "PYTHONPATH": str(_common.ROOT),
            "BELVEDIR_DEV": "1",
            "Q_CLUSTER_NAME": "runs",
            "LOG_LEVEL": "INFO",
        }
        env.pop("REDIS_URL", None)
        user = user_signup(
            email="bench@example.com", password="bench-password-1", organization_name="Bench"
        )
        project = Membership.objects.get(user=user).organization.projects.get()
        harness = harness_create(
            project=project,
            name="holds",
            repo_url=run_overhead.make_harness_repo(tmp),
            install_command="true",
            run_command=f"sleep {args.hold} && {run_overhead.RUN}",
            created_by=user,
        )
        print(disk_bound(), flush=True)
        rows = [one_level(n, args, env, tmp, project, harness, user) for n in args.levels]
        print(
            f"\n{args.runtime}, each run sleeping {args.hold} s; CPU over {SAMPLE_S:.0f} s of the hold:"
        )
        header = [
            "runs at once (Q_WORKERS)", "start p50 / last, s", "sandbox MB p50",
            "workers' PSS growth per run, MB", "idle cluster PSS, MB",
            "DB connections: idle cluster + per run",
            "cluster CPU per run, % core", "sandbox CPU per run, % core",
        ]  # fmt: skip
        print(table(rows, header))
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"load average at the end: {' '.join(load)}")
        print(disk_bound())
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep_db:
            _common.database_drop(DB_NAME)


if __name__ == "__main__":
    sys.exit(main())
