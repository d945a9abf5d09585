"""`python3 -m belvedir_harbor.run`: run `harbor run` on a Harbor dataset and write
results.json (the mean reward as the score, each task's reward).

Reads HARBOR_DATASET (a directory of Harbor tasks, or a registry dataset name such as
`terminal-bench@2.1`), HARBOR_AGENT (a Harbor agent name; `belvedir` is the Belvedir agent,
the default), HARBOR_MODEL or MODEL, HARBOR_N_TASKS, HARBOR_CONCURRENCY (1 by default) and
HARBOR_TASK_NAMES (comma-separated). Harbor itself (PyPI `harbor`, Python >= 3.12) must be on
PATH; `--check` says whether it is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from belvedir_harbor import AGENT_IMPORT_PATH

ROOT = Path(__file__).resolve().parent.parent


def note(message: str) -> None:
    print(f"belvedir-harbor: {message}", file=sys.stderr, flush=True)


def agent_argument(agent: str) -> str:
    """`belvedir` (the plain name) is this repository's agent; others are Harbor's."""
    return AGENT_IMPORT_PATH if agent in ("", "belvedir") else agent


def harbor_command(env, jobs_dir: Path) -> list[str]:
    dataset = env.get("HARBOR_DATASET", "").strip()
    if not dataset:
        raise ValueError("HARBOR_DATASET is not set: a directory of Harbor tasks or a dataset.")
    command = ["harbor", "run", "-y", "--jobs-dir", str(jobs_dir)]
    command += ["-p", dataset] if os.path.isdir(dataset) else ["-d", dataset]
    command += ["-a", agent_argument(env.get("HARBOR_AGENT", "").strip())]
    model = env.get("HARBOR_MODEL") or env.get("MODEL")
    if model:
        command += ["-m", model]
    command += ["-n", env.get("HARBOR_CONCURRENCY") or "1"]
    if env.get("HARBOR_N_TASKS"):
        command += ["--n-tasks", env["HARBOR_N_TASKS"]]
    for name in filter(None, (n.strip() for n in env.get("HARBOR_TASK_NAMES", "").split(","))):
        command += ["--include-task-name", name]
    return command


def read_job(jobs_dir: Path) -> dict:
    """results.json from Harbor's job result: the mean reward and each trial's reward."""
    found = sorted(jobs_dir.glob("*/result.json"))
    if not found:
        raise ValueError(f"harbor wrote no job result under {jobs_dir}")
    job = json.loads(found[-1].read_text())
    tasks: dict[str, float] = {}
    mean = None
    for stats in (job.get("stats") or {}).get("evals", {}).values():
        for metric in stats.get("metrics") or []:
            if mean is None and isinstance(metric.get("mean"), int | float):
                mean = float(metric["mean"])
        for value, trials in (stats.get("reward_stats") or {}).get("reward", {}).items():
            for trial in trials:
                tasks[trial.split("__")[0]] = float(value)
    if mean is None:
        mean = sum(tasks.values()) / len(tasks) if tasks else 0.0
    return {"score": mean, "tasks": tasks, "harbor_job": found[-1].parent.name}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m belvedir_harbor.run")
    parser.add_argument("--check", action="store_true", help="say what would run, and exit")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # Under the repo root: Harbor's task containers bind-mount trial directories, and a Harbor
    # that drives the host's engine from a container needs paths the host shares.
    jobs_dir = Path.cwd() / "harbor-jobs"
    shutil.rmtree(jobs_dir, ignore_errors=True)
    try:
        command = harbor_command(env, jobs_dir)
    except ValueError as exc:
        note(str(exc))
        return 2
    if shutil.which("harbor") is None:
        note("Harbor is not installed here (PyPI harbor, Python >= 3.12); cannot run the tasks.")
        return 0 if args.check else 2
    print("belvedir-harbor: " + " ".join(command), flush=True)
    if args.check:
        return 0
    done = subprocess.run(command, env=env)
    if done.returncode != 0:
        note(f"harbor run exited with {done.returncode}.")
        return done.returncode
    try:
        results = read_job(jobs_dir)
    except (ValueError, OSError) as exc:
        note(str(exc))
        return 2
    Path("results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"belvedir-harbor: score {results['score']:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
