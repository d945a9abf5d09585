"""Platform overhead of one run: launch-to-finish through Belvedir vs. a plain `docker run`.

    .venv/bin/python bench/run_overhead.py [--runs 7] [--runtimes runc runsc] [--keep-db]

A trivial harness (install `true`, run a one-line python3 that writes results.json with
score 1) in a local git repository, launched from its file:// URL:

* platform: `runs.services.run_launch(...)` (input checks, `git ls-remote`, caps under the
  row lock, Run + per-run key, django-q2 enqueue on commit) and then
  `runs.executor.execute_run(run_id)` in this process, which is what a django-q2 worker
  does (the worker's queue pick-up delay, up to Q_CLUSTER poll = 0.2 s, is not included);
  timed from before run_launch to after execute_run returns, with the run succeeded.
* baseline: the same clone, install and run by hand: `git clone --depth 1 file://…`, chown
  the clone to the sandbox uid, `docker run` of the same image with the same limits and
  flags the platform sets (user 1000:1000, cap-drop ALL, no-new-privileges, init, pids,
  CPU and memory limits, the sandbox network, json-file log caps, the runtime) with the
  clone bind-mounted at /workspace/repo, read results.json, `docker rm`. (A bind mount,
  where the platform copies the repo in with put_archive and gives the sandbox a read-only
  root and a disk-quota volume: those are part of what the platform costs.)

Both paths run once per runtime (runc, and gVisor's runsc by default), side by side; the
platform's sandboxes are isolated as in production (the sandbox network, the quota volume).
Runs alternate (platform first, then baseline first, ...) after one warm-up of each.
Prints medians, the ratio, the absolute overhead per run (PASS/MISS against 1 s) and a
breakdown of the platform time taken by wrapping functions with time.perf_counter in this
script only. Exits 0 unless something errored. Uses its own database `belvedir_bench_run`
(dropped and created at start, dropped at the end) and cleans up its containers and temp
dirs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import _common
from _run_overhead_report import report, side_by_side

DB_NAME = "belvedir_bench_run"
IMAGE = os.environ.get("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:latest")
BENCH_LABEL = "belvedir.bench=run_overhead"
INSTALL = "true"
RUN = "python3 -c \"import json; json.dump({'score': 1}, open('results.json','w'))\""
# The platform's defaults (settings BELVEDIR_SANDBOX_CPUS/MEMORY/PIDS), used by both paths.
CPUS, MEMORY, PIDS = "2", "4g", "512"
TIME_CAP_S = 240  # the whole benchmark stops starting runs after this


def sh(args: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args[:3])}… exited {done.returncode}: {done.stderr.strip()[:500]}"
        )
    return done


def make_harness_repo(root: Path) -> str:
    repo = root / "trivial-harness"
    repo.mkdir()
    (repo / "README.md").write_text("A trivial harness for bench/run_overhead.py.\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    sh([*git, "init", "-q", "-b", "main"], cwd=repo)
    sh([*git, "add", "-A"], cwd=repo)
    sh([*git, "commit", "-qm", "trivial harness"], cwd=repo)
    return f"file://{repo}"


def docker_time(stamp: str) -> float:
    """Docker's RFC 3339 nanosecond timestamp as a POSIX time."""
    stamp = stamp.rstrip("Z")
    whole, _, frac = stamp.partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (frac or "0"))


class Probe:
    """Accumulates wall time per label for the current run; wraps functions in place."""

    def __init__(self) -> None:
        self.cur: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.marks: dict[str, float] = {}
        self.excluded = 0.0  # instrumentation time to subtract (docker inspect)

    def reset(self) -> None:
        self.cur, self.calls, self.marks, self.excluded = (
            defaultdict(float),
            defaultdict(int),
            {},
            0.0,
        )

    def wrap(self, owner, attr: str, label: str, after=None) -> None:
        original = getattr(owner, attr, None)
        if original is None:  # the platform code moved on: time the rest, say what is missing
            print(
                f"(breakdown: {getattr(owner, '__name__', owner)}.{attr} not found)",
                file=sys.stderr,
            )
            return

        @functools.wraps(original)
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                self.cur[label] += time.perf_counter() - started
                self.calls[label] += 1
            if after is not None:
                after(args, kwargs, result)
            return result

        setattr(owner, attr, timed)


def instrument(probe: Probe) -> None:
    """Wrap the platform's steps (in this process only) so each run's time can be broken down."""
    from runs import executor, launch_checks, services
    from sandboxes.docker import DockerBackend

    probe.wrap(launch_checks, "sandbox_check", "launch: sandbox engine ping")
    probe.wrap(services, "repo_check", "launch: git ls-remote")
    probe.wrap(services, "run_enqueue", "launch: django-q2 enqueue")
    probe.wrap(executor, "run_claim", "exec: claim run")
    probe.wrap(executor, "run_model_secrets", "exec: decrypt secrets")
    # executor only calls shutil.rmtree: give it a namespace whose rmtree is timed.
    executor.shutil = types.SimpleNamespace(rmtree=shutil.rmtree)
    probe.wrap(executor.shutil, "rmtree", "exec: rmtree (work dir)")
    probe.wrap(executor, "clone_repo", "exec: clone (init/fetch/checkout, drop .git)")
    probe.wrap(executor, "tar_directory", "exec: tar workspace")
    from sandboxes import volumes

    probe.wrap(volumes, "allocate", "sandbox: quota volume (a spare, or copy + mount)")
    probe.wrap(volumes, "make_spare", "exec: spare volume made (in remove)")
    probe.wrap(volumes, "release", "exec: quota volume release (in remove)")
    probe.wrap(DockerBackend, "_create", "sandbox: container create")
    probe.wrap(DockerBackend, "_put_workspace", "sandbox: put_archive")
    probe.wrap(DockerBackend, "launch", "exec: launch (create, copy, attach, start)")
    probe.wrap(executor.Execution, "follow", "exec: follow (output, wait)")
    probe.wrap(executor.Execution, "finish", "exec: finish (collect, judge, record)")

    def ended(args, kwargs, result):
        if result is not None:
            probe.marks["signed_exit"] = time.time()

    probe.wrap(
        executor.Execution, "_signed_exit", "follow: the entrypoint's exit record", after=ended
    )

    def waited(args, kwargs, result):
        if result is not None:
            probe.marks["wait_returned"] = time.time()

    probe.wrap(DockerBackend, "wait", "follow: backend.wait (own thread)", after=waited)
    probe.wrap(DockerBackend, "collect", "finish: collect stage + results.json")

    def finished(args, kwargs, result):
        probe.marks["run_finished"] = time.perf_counter()

    probe.wrap(executor, "run_finish", "finish: run_finish (DB, revoke key)", after=finished)
    probe.wrap(DockerBackend, "kill", "exec: kill")
    import docker

    probe.wrap(docker, "from_env", "  (docker client: from_env + /version)")
    probe.wrap(DockerBackend, "_container", "  (containers.get lookups, inside the steps above)")

    original_remove = DockerBackend.remove

    def remove(self, handle):
        started = time.perf_counter()
        try:  # the container's own start/finish, before it is gone (not counted)
            state = self.client.api.inspect_container(handle.id)["State"]
            probe.marks["started"] = docker_time(state["StartedAt"])
            probe.marks["finished"] = docker_time(state["FinishedAt"])
        except Exception:
            pass
        probe.excluded += time.perf_counter() - started
        return original_remove(self, handle)

    DockerBackend.remove = remove
    probe.wrap(DockerBackend, "remove", "exec: container remove")


def platform_once(probe: Probe, project, harness, user, runtime: str) -> dict[str, float]:
    from django.conf import settings

    from runs import services
    from runs.executor import execute_run
    from runs.models import Run, Status

    settings.BELVEDIR_SANDBOX_RUNTIME = runtime
    probe.reset()
    t0 = time.perf_counter()
    run = services.run_launch(project=project, harness=harness, created_by=user)
    t1 = time.perf_counter()
    status = execute_run(run.pk)
    t2 = time.perf_counter()
    run = Run.objects.get(pk=run.pk)
    if status != Status.SUCCEEDED or run.status != Status.SUCCEEDED or run.score != 1.0:
        raise RuntimeError(
            f"platform run {run.pk} ended {run.status} (score {run.score}): {run.notes} {run.log_tail[-500:]}"
        )
    out = dict(probe.cur)
    out["total"] = (t2 - t0) - probe.excluded
    out["launch (run_launch)"] = t1 - t0
    out["execute_run"] = (t2 - t1) - probe.excluded
    # What a user sees: the run reads "succeeded" once run_finish commits; kill, remove and
    # the work dir's removal come after that.
    out["launch -> run marked succeeded"] = probe.marks["run_finished"] - t0
    out["exec: cleanup after run_finish"] = t2 - probe.marks["run_finished"] - probe.excluded
    if "started" in probe.marks and "finished" in probe.marks:
        out["in container (StartedAt -> FinishedAt)"] = (
            probe.marks["finished"] - probe.marks["started"]
        )
        if "wait_returned" in probe.marks:
            out["follow: exit -> wait returned"] = (
                probe.marks["wait_returned"] - probe.marks["finished"]
            )
        if "signed_exit" in probe.marks:  # negative: before the engine recorded the exit
            out["follow: exit -> exit record read"] = (
                probe.marks["signed_exit"] - probe.marks["finished"]
            )
    return out


def baseline_once(repo_url: str, root: Path, index: int, runtime: str) -> dict[str, float]:
    from django.conf import settings

    work = Path(tempfile.mkdtemp(prefix=f"base{index}-", dir=root))
    clone = work / "repo"
    name = f"belvedir-bench-base-{os.getpid()}-{index}-{runtime}"
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    sh(["git", "clone", "-q", "--depth", "1", repo_url, str(clone)])
    t1 = time.perf_counter()
    for path in [clone, *clone.rglob("*")]:
        os.lchown(path, 1000, 1000)
    t2 = time.perf_counter()
    sh(
        [
            "docker", "run", "--name", name, "--label", BENCH_LABEL,
            "--runtime", runtime, "--network", settings.BELVEDIR_SANDBOX_NETWORK,
            "--user", "1000:1000", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--init", "--pids-limit", PIDS,
            "--cpus", CPUS, "--memory", MEMORY, "--memory-swap", MEMORY,
            "--log-driver", "json-file", "--log-opt", "max-size=10m", "--log-opt", "max-file=2",
            "-v", f"{clone}:/workspace/repo", "-w", "/workspace/repo",
            IMAGE, "bash", "-c", f"{INSTALL} && {RUN}",
        ]
    )  # fmt: skip
    t3 = time.perf_counter()
    results = json.loads((clone / "results.json").read_text())
    t4 = time.perf_counter()
    state = json.loads(sh(["docker", "inspect", name]).stdout)[0]["State"]  # not counted
    t5 = time.perf_counter()
    sh(["docker", "rm", "-f", name])
    t6 = time.perf_counter()
    shutil.rmtree(work, ignore_errors=True)  # the platform removes its work dir too
    t7 = time.perf_counter()
    if results.get("score") != 1:
        raise RuntimeError(f"baseline results.json: {results}")
    out["git clone --depth 1"] = t1 - t0
    out["chown clone to 1000:1000"] = t2 - t1
    out["docker run (create+start+wait)"] = t3 - t2
    out["read results.json"] = t4 - t3
    out["docker rm"] = t6 - t5
    out["rm -r clone"] = t7 - t6
    out["in container (StartedAt -> FinishedAt)"] = docker_time(state["FinishedAt"]) - docker_time(
        state["StartedAt"]
    )
    out["total"] = (t7 - t0) - (t5 - t4)
    return out


def cleanup_containers(run_ids: list[str]) -> None:
    filters = [["--filter", f"label={BENCH_LABEL}"]] + [
        ["--filter", f"label=belvedir.run_id={rid}"] for rid in run_ids
    ]
    for flt in filters:
        try:
            ids = subprocess.run(
                ["docker", "ps", "-aq", *flt], capture_output=True, text=True, timeout=30
            ).stdout.split()
            if ids:
                subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=60)
        except Exception as exc:  # report, keep cleaning
            print(f"cleanup: {exc}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="measured runs per path (default 7)")
    parser.add_argument("--runtimes", nargs="+", default=["runc", "runsc"])
    parser.add_argument("--keep-db", action="store_true", help=f"keep database {DB_NAME}")
    args = parser.parse_args()
    if shutil.which("docker") is None:
        print("docker is not installed", file=sys.stderr)
        return 1

    root = Path(tempfile.mkdtemp(prefix="belvedir-bench-run-"))
    run_ids: list[str] = []
    url = _common.database_recreate(DB_NAME)
    try:
        _common.django_setup(
            url,
            BELVEDIR_SANDBOX_BASE_URL="http://172.30.0.1:9",  # no Tasks: never contacted
            BELVEDIR_SANDBOX_IMAGE=IMAGE,
            BELVEDIR_SANDBOX_CPUS=CPUS,
            BELVEDIR_SANDBOX_MEMORY=MEMORY,
            BELVEDIR_SANDBOX_PIDS=PIDS,
            BELVEDIR_RUN_TIMEOUT="120",
            BELVEDIR_RUNS_PER_DAY_CAP="10000",
        )
        from belvedir.models import Membership
        from belvedir.services import user_signup
        from harnesses.services import harness_create

        sh(["docker", "image", "inspect", IMAGE])  # fails clearly when the image is missing
        user = user_signup(
            email="bench@example.com", password="bench-password-1", organization_name="Bench"
        )
        project = Membership.objects.get(user=user).organization.projects.get()
        repo_url = make_harness_repo(root)
        harness = harness_create(
            project=project,
            name="trivial",
            repo_url=repo_url,
            install_command=INSTALL,
            run_command=RUN,
            created_by=user,
        )
        probe = Probe()
        instrument(probe)
        from runs.models import Run

        platform: dict[str, list[dict]] = {rt: [] for rt in args.runtimes}
        baseline: dict[str, list[dict]] = {rt: [] for rt in args.runtimes}
        started = time.monotonic()
        for i in range(args.runs + 1):
            if time.monotonic() - started > TIME_CAP_S:
                print(
                    f"time cap of {TIME_CAP_S} s reached after {i - 1} measured runs",
                    file=sys.stderr,
                )
                break
            for runtime in args.runtimes if i % 2 == 0 else args.runtimes[::-1]:
                steps = [
                    lambda rt=runtime: platform_once(probe, project, harness, user, rt),
                    lambda i=i, rt=runtime: baseline_once(repo_url, root, i, rt),
                ]
                if i % 2:
                    steps.reverse()
                results = [step() for step in steps]
                if i % 2:
                    results.reverse()
                run_ids[:] = list(Run.objects.values_list("pk", flat=True))
                p, b = results
                tag = "warm-up" if i == 0 else f"run {i}"
                print(
                    f"{tag:>8} {runtime:>5}: platform {p['total'] * 1000:7.0f} ms   "
                    f"baseline {b['total'] * 1000:7.0f} ms",
                    flush=True,
                )
                if i > 0:
                    platform[runtime].append(p)
                    baseline[runtime].append(b)
        if not any(platform.values()):
            print("no measured runs", file=sys.stderr)
            return 1
        for runtime in args.runtimes:
            print(f"\n===== runtime {runtime} =====")
            report(platform[runtime], baseline[runtime])
        side_by_side(platform, baseline)
        return 0
    finally:
        try:
            from runs.models import Run

            run_ids[:] = list(Run.objects.values_list("pk", flat=True))
        except Exception:
            pass
        cleanup_containers(run_ids)
        shutil.rmtree(root, ignore_errors=True)
        if not args.keep_db:
            _common.database_drop(DB_NAME)


if __name__ == "__main__":
    sys.exit(main())
