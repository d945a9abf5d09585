"""How long an idle `manage.py qcluster` takes to exit after one SIGTERM to its main process.

    .venv/bin/python bench/qcluster_stop.py [--rounds 5] [--keep-db]

* platform: `manage.py qcluster` (runs/management/commands/qcluster.py), the runs cluster
  with its default workers (Q_WORKERS, 8), started in its own process group and left idle
  until it logs "running."; timed from the SIGTERM to the main process's exit, then checked
  that no process of its group is left.
* baseline: django-q2's own qcluster command (`django_q.management.commands.qcluster`), the
  same way.

Rounds alternate (platform first, then baseline first, ...). Prints the medians and
PASS/MISS against the target: exit within 10 s, nothing left behind. Uses its own database
`belvedir_bench_qcluster` (dropped and created at start, dropped at the end). Exits 0 unless
something errored.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, database_drop, database_recreate, django_setup, median, table

DB = "belvedir_bench_qcluster"
TARGET = 10.0
STOCK = (
    "import django; django.setup(); "
    "from django_q.management.commands.qcluster import Command; "
    "Command().run_from_argv(['manage.py', 'qcluster'])"
)


def group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        state, _ppid, pgrp = text[text.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            return True
    return False


def one_stop(command: list[str], env: dict, log: Path) -> tuple[float, bool]:
    """Start a cluster, wait until it runs, SIGTERM its main process; (seconds, clean)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    while b"running." not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            raise RuntimeError(f"the cluster did not start:\n{log.read_text()}")
        time.sleep(0.1)
    time.sleep(1)  # settled: the pusher polls, the workers wait
    started = time.monotonic()
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=120)
        seconds = time.monotonic() - started
    except subprocess.TimeoutExpired:
        seconds = float("inf")
    time.sleep(0.5)
    clean = not group_alive(process.pid)
    if group_alive(process.pid) or process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    return seconds, clean


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()

    url = database_recreate(DB)
    try:
        django_setup(url)
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "belvedir.settings",
            "Q_CLUSTER_NAME": "runs",
            "PYTHONPATH": str(ROOT),
            "LOG_LEVEL": "INFO",  # the cluster logs "running." at INFO
        }
        commands = {
            "platform": [sys.executable, "manage.py", "qcluster"],
            "baseline": [sys.executable, "-c", STOCK],
        }
        results: dict[str, list[tuple[float, bool]]] = {name: [] for name in commands}
        with tempfile.TemporaryDirectory(prefix="bench-qcluster-") as tmp:
            for round_ in range(args.rounds):
                order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
                for name in order:
                    log = Path(tmp) / f"{name}-{round_}.log"
                    results[name].append(one_stop(commands[name], env, log))
        rows = []
        for name, runs in results.items():
            seconds = [s for s, _ in runs]
            clean = all(c for _, c in runs)
            rows.append(
                [
                    name,
                    f"{median(seconds):.2f} s",
                    f"{max(seconds):.2f} s",
                    "yes" if clean else "NO",
                ]
            )
        print(table(rows, ["qcluster", "median exit", "slowest exit", "nothing left"]))
        platform = results["platform"]
        ok = max(s for s, _ in platform) <= TARGET and all(c for _, c in platform)
        verdict = "PASS" if ok else "MISS"
        print(
            f"\n{verdict}: an idle qcluster exits within {TARGET:.0f} s of SIGTERM, leaving nothing"
        )
        return 0
    finally:
        if not args.keep_db:
            database_drop(DB)


if __name__ == "__main__":
    raise SystemExit(main())
