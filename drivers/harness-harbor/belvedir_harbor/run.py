"""`python3 -m belvedir_harbor.run`: run `harbor run` on a dataset, BELVEDIR_TASK_ATTEMPTS trials
per task, and write results.json (each task's rewards folded by BELVEDIR_GRADING as the Belvedir
Runner folds its attempts, the mean over the tasks as the score, the trials that errored and
why, the agent and the dataset). A run whose every trial errored has no score: it exits 3.

The tasks: with no HARBOR_DATASET, a platform run's Tasks field (BELVEDIR_TASKS_FILE set), as
the platform exports it with the environments' code (`GET /api/v1/runs/{id}/tasks/export`,
with the run's key). HARBOR_DATASET is one of:
- `belvedir:<environment id>`: the project's environment, exported as a Harbor dataset through
  the platform's API with the run's key (`GET /api/v1/environments/{id}/export`);
- `belvedir-sample`: the small Harbor-format dataset shipped in this package (`sample/`);
- a directory of Harbor tasks;
- a Harbor registry dataset name (`terminal-bench@2.1`, `swebench-verified`, ...), which needs
  an online install: offline the run fails fast saying so.

HARBOR_AGENT is a Harbor agent name (`oracle`, `nop`, `terminus-2`, `claude-code`, ...; the
default `belvedir` is this package's agent). HARBOR_MODEL or MODEL, HARBOR_N_TASKS,
HARBOR_CONCURRENCY (1 by default) and HARBOR_TASK_NAMES (comma-separated) shape the job.

Where the task containers run: with MODAL_TOKEN_ID and MODAL_TOKEN_SECRET both set, Harbor's
Modal environment (your Modal account); otherwise, in a platform run (BELVEDIR_BASE_URL and the
run's BELVEDIR_API_KEY set), the Belvedir environment, the platform's task sandboxes
(`belvedir_harbor.environment:BelvedirEnvironment`); elsewhere Harbor's Docker environment. Harbor's usage telemetry is
always off. Harbor itself (PyPI `harbor`, Python >= 3.12) must be on PATH; `--check` says
whether it is and what would run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from belvedir_runner import grading  # the Runner's folding, served in this repository too

from belvedir_harbor import AGENT_IMPORT_PATH, agents, trials
from belvedir_harbor.agents import (
    ANTHROPIC_AGENTS,
    LITELLM_AGENTS,
    Refused,
    anthropic_settings,
    reachable,
)
from belvedir_harbor.dataset import agents_installed, task_groups
from belvedir_harbor.prestart import Prestarted

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_NAME = "belvedir-sample"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
ENVIRONMENT_IMPORT_PATH = "belvedir_harbor.environment:BelvedirEnvironment"
ENVIRONMENT_PREFIX = "belvedir:"
# Harbor reads its registry of datasets from here (harbor.constants.DEFAULT_REGISTRY_URL).
REGISTRY_URL = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"
JOBS_DIR = "harbor-jobs"
DATASET_DIR = "harbor-dataset"
# Beside a fetched environment's folder: how many tasks the environment has (the export's
# X-Belvedir-Tasks-Total), when HARBOR_N_TASKS fetched only the first ones.
TASKS_TOTAL_FILE = "tasks-total"
TASKS_DATASET = "tasks"  # results.json's dataset for a harness's Tasks field


def note(message: str) -> None:
    print(f"belvedir-harbor: {message}", file=sys.stderr, flush=True)


def agent_argument(agent: str) -> str:
    """`belvedir` (the plain name, and the default) is this package's agent; others are
    Harbor's own names, passed as they are."""
    return AGENT_IMPORT_PATH if agent in ("", "belvedir") else agent


def uses_modal(env) -> bool:
    """Both Modal tokens set: the user's own Modal account runs the task containers."""
    return bool(env.get("MODAL_TOKEN_ID", "").strip() and env.get("MODAL_TOKEN_SECRET", "").strip())


def environment_choice(env) -> str:
    """Where the task containers run: `modal` (both Modal tokens set), `belvedir` (in a
    platform run: its task sandboxes, with BELVEDIR_BASE_URL and the run's BELVEDIR_API_KEY),
    else `docker` (Harbor's own, on your machine)."""
    if uses_modal(env):
        return "modal"
    if env.get("BELVEDIR_BASE_URL", "").strip() and env.get("BELVEDIR_API_KEY", "").strip():
        return "belvedir"
    return "docker"


def _whole(env, name: str, low: int, high: int | None = None) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < low or (high is not None and int(raw) > high):
        bound = f"{low} to {high}" if high is not None else f"at least {low}"
        raise Refused(f"{name} must be a whole number, {bound}, not {raw!r}.")
    return int(raw)


def _attempts(env) -> int:
    """BELVEDIR_TASK_ATTEMPTS (the run's attempts per task, 1 when unset), as the Runner reads it."""
    return _whole(env, "BELVEDIR_TASK_ATTEMPTS", 1, 100) or 1


def _grading(env) -> str:
    """BELVEDIR_GRADING as the Runner reads it (blank: pass@1); Refused naming it otherwise."""
    try:
        return grading.grading_from(env.get("BELVEDIR_GRADING"))
    except ValueError as exc:
        raise Refused(str(exc)) from None


def task_names(env) -> list[str]:
    return [n.strip() for n in env.get("HARBOR_TASK_NAMES", "").split(",") if n.strip()]


def dataset_kind(dataset: str) -> str:
    """`environment`, `sample`, `directory` or `registry`."""
    if dataset.startswith(ENVIRONMENT_PREFIX):
        return "environment"
    if dataset == SAMPLE_NAME:
        return "sample"
    if os.path.isdir(dataset):
        return "directory"
    return "registry"


def harbor_env(env) -> dict[str, str]:
    """Harbor's process environment: the driver importable, telemetry off, LiteLLM's price
    list local, the model's OpenAI-compatible base for LiteLLM-based agents, a writable HOME."""
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out["HARBOR_TELEMETRY"] = "0"
    out.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if env.get("MODEL_API_BASE"):
        out.setdefault("OPENAI_API_BASE", env["MODEL_API_BASE"])
        out.setdefault("OPENAI_BASE_URL", env["MODEL_API_BASE"])
    if env.get("MODEL_API_KEY"):
        out.setdefault("OPENAI_API_KEY", env["MODEL_API_KEY"])
    if env.get("HARBOR_AGENT", "").strip() in ANTHROPIC_AGENTS:
        out.update({k: v for k, v in anthropic_settings(env).items() if not env.get(k)})
    home = env.get("HOME", "")
    if not home or not os.access(home, os.W_OK):
        out["HOME"] = str(Path.cwd() / ".harbor-home")
    return out


def harbor_command(env, dataset_path: Path | None, jobs_dir: Path) -> list[str]:
    """`harbor run ...` for the settings in `env`; `dataset_path` is the local dataset (None
    for a registry dataset)."""
    dataset = env.get("HARBOR_DATASET", "").strip()
    concurrency = _whole(env, "HARBOR_CONCURRENCY", 1) or 1
    n_tasks = _whole(env, "HARBOR_N_TASKS", 1)
    command = ["harbor", "run", "-y", "--jobs-dir", str(jobs_dir)]
    command += ["-p", str(dataset_path)] if dataset_path is not None else ["-d", dataset]
    agent = agent_argument(env.get("HARBOR_AGENT", "").strip())
    command += ["-a", agent]
    model = (env.get("HARBOR_MODEL") or env.get("MODEL") or "").strip()
    # The model in the form the agent needs, to MODEL_API_BASE (the router when covered), not
    # the provider the model's name would pick.
    command += agents.model_arguments(env, agent, model)
    command += ["-n", str(concurrency)]
    _grading(env)  # refused before anything runs, not after
    attempts = _attempts(env)
    if attempts > 1:  # one trial per attempt of each task
        command += ["--n-attempts", str(attempts)]
    where = environment_choice(env)
    if agent in LITELLM_AGENTS and where == "belvedir":
        # asciinema's recorder never starts its shell under the platform's gVisor (20240729),
        # so terminus-2 would type into a dead pane: no recording in the managed workspace.
        command += ["--ak", "record_terminal_session=false"]
    command += ["--env", ENVIRONMENT_IMPORT_PATH if where == "belvedir" else where]
    if n_tasks:
        command += ["--n-tasks", str(n_tasks)]
    for name in task_names(env):
        command += ["--include-task-name", name]
    return command


def _platform(env, what: str) -> tuple[str, str]:
    base = env.get("BELVEDIR_BASE_URL", "").rstrip("/")
    key = env.get("BELVEDIR_API_KEY", "")
    if not base or not key:
        raise Refused(
            f"{what} is fetched from the platform: BELVEDIR_BASE_URL and BELVEDIR_API_KEY must "
            "be set (the platform sets both in a run)."
        )
    return base, key


def _limit_query(env) -> str:
    """?limit=HARBOR_N_TASKS, unless HARBOR_TASK_NAMES picks tasks (they may lie past it)."""
    limit = None if task_names(env) else _whole(env, "HARBOR_N_TASKS", 1)
    return f"?limit={limit}" if limit else ""


def fetch_environment(env, out: Path) -> Path:
    """The environment `belvedir:<id>` as a Harbor dataset under `out` (its export's folder),
    fetched with the run's key; HARBOR_N_TASKS limits it unless HARBOR_TASK_NAMES picks tasks."""
    environment_id = env["HARBOR_DATASET"].strip()[len(ENVIRONMENT_PREFIX) :].strip()
    if not environment_id:
        raise Refused("HARBOR_DATASET belvedir:<environment id> names no environment.")
    base, key = _platform(env, "HARBOR_DATASET belvedir:<id>")
    url = f"{base}/api/v1/environments/{urllib.parse.quote(environment_id)}/export"
    return _fetch_export(url + _limit_query(env), key, out, f"environment {environment_id}")


def fetch_tasks(env, out: Path) -> Path:
    """The harness's Tasks field as a Harbor dataset under `out`: the platform exports the
    run's Tasks with the environments' export code (`GET /api/v1/runs/{id}/tasks/export`),
    fetched with the run's key."""
    base, key = _platform(env, "A Harbor harness's Tasks field")
    run_id = env.get("BELVEDIR_RUN_ID", "").strip()
    if not run_id:
        raise Refused(
            "A Harbor harness's Tasks field is exported by the platform at a run: "
            "BELVEDIR_RUN_ID must be set (the platform sets it in a run)."
        )
    url = f"{base}/api/v1/runs/{urllib.parse.quote(run_id)}/tasks/export"
    return _fetch_export(url + _limit_query(env), key, out, "the Tasks field")


def _fetch_export(url: str, key: str, out: Path, what: str) -> Path:
    """A Harbor export zip from the platform, unpacked under `out`; its one folder."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            data = answer.read()
            total = (answer.headers.get("X-Belvedir-Tasks-Total") or "").strip()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode("utf-8", "replace")
        raise Refused(f"could not export {what} (HTTP {exc.code}): {detail}") from None
    except urllib.error.URLError as exc:
        base = urllib.parse.urlsplit(url)
        raise Refused(
            f"the platform at {base.scheme}://{base.netloc} is unreachable: {exc.reason}"
        ) from None
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.infolist():
            target = (out / member.filename).resolve()
            if not target.is_relative_to(out.resolve()):
                raise Refused(f"the export holds a path outside its folder: {member.filename}")
        archive.extractall(out)
    roots = [p for p in out.iterdir() if p.is_dir()]
    if len(roots) != 1:
        raise Refused(f"the export of {what} has no single folder")
    if total.isdigit():
        (out / TASKS_TOTAL_FILE).write_text(total)
    for script in roots[0].glob("*/*/*.sh"):  # zip extraction drops the executable bit
        script.chmod(0o755)
    return roots[0]


def dataset_size(dataset_path: Path | None) -> int | None:
    """How many tasks the dataset has (a fetched environment: all of them, not only those
    fetched); None for a registry dataset."""
    if dataset_path is None:
        return None
    told = dataset_path.parent / TASKS_TOTAL_FILE
    if told.is_file() and told.read_text().strip().isdigit():
        return int(told.read_text().strip())
    return sum(1 for p in dataset_path.iterdir() if (p / "task.toml").is_file())


def registry_reachable(timeout: float = 5.0) -> bool:
    """Whether Harbor's dataset registry answers from here (an offline install: no)."""
    return reachable(REGISTRY_URL, timeout)


def agent_downloads_check(env, dataset_path: Path | None = None) -> None:
    """agents.agent_downloads_check: nothing is checked on your own Modal account, nor for an
    agent the dataset's every task image holds (its task.toml says so)."""
    installed = agents_installed(dataset_path)
    agents.agent_downloads_check(env, modal=uses_modal(env), installed=installed)


def prepare_dataset(env, workdir: Path, *, check: bool = False) -> Path | None:
    """The local dataset directory Harbor gets with `-p`, or None for a registry dataset."""
    dataset = env.get("HARBOR_DATASET", "").strip()
    if not dataset and (env.get("BELVEDIR_TASKS_FILE") or env.get("FRACTAL_TASKS_FILE")):
        # The harness's Tasks field: the platform's Harbor export of it, one task per folder.
        out = workdir / DATASET_DIR
        return out if check else fetch_tasks(env, out)
    if not dataset:
        raise Refused(
            "HARBOR_DATASET is not set: belvedir:<environment id>, belvedir-sample, a directory "
            "of Harbor tasks or a Harbor registry dataset name."
        )
    kind = dataset_kind(dataset)
    if kind == "sample":
        return SAMPLE_DIR
    if kind == "directory":
        return Path(dataset).resolve()
    if kind == "environment":
        out = workdir / DATASET_DIR
        return out if check else fetch_environment(env, out)
    if not registry_reachable():
        raise Refused(
            f"HARBOR_DATASET {dataset!r} is a Harbor registry dataset, and the registry cannot "
            "be reached from here: registry datasets need an online install (internet access "
            "for the registry, the tasks' git repositories and their base images). Use "
            "belvedir:<environment id> or belvedir-sample offline."
        )
    return None


def read_job(
    jobs_dir: Path, env, dataset_tasks: int | None = None, groups: dict | None = None
) -> dict:
    """results.json from Harbor's job. Each task ran BELVEDIR_TASK_ATTEMPTS trials; their
    rewards are folded by BELVEDIR_GRADING with the Belvedir Runner's own definition
    (`belvedir_runner.grading`): `tasks` maps each task to {"attempts": [rewards], "score",
    "errored": n, "group"} (its task.toml's, from `groups`), and the score is the mean over the tasks that have one. A trial that errored
    (no valid reward in Harbor's terms) is not counted 0: it is only counted in its task's
    `errored`; a task whose every trial errored has no score and is listed under `errored`
    with why; with every task errored the score is null. `errors` keeps, per task, the first
    exception a trial recorded, scored or not. `n_tasks` is how many tasks ran; when
    HARBOR_N_TASKS capped them, `n_tasks_total` is how many the dataset has (`dataset_tasks`)
    and `task_limit` the cap, so the platform says "ran N of M tasks"."""
    found = sorted(jobs_dir.glob("*/result.json"))
    if not found:
        raise ValueError(f"harbor wrote no job result under {jobs_dir}")
    job_dir = found[-1].parent
    rule = _grading(env)
    rewards: dict[str, list[float]] = {}
    failed: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    for path in sorted(job_dir.glob("*/result.json"), key=trials.started):
        trial = json.loads(path.read_text())
        name = str(trial.get("task_name") or path.parent.name.rsplit("__", 1)[0])
        reward = trials.reward(trial)
        why = trials.errored(trial, reward)
        rewards.setdefault(name, [])
        failed.setdefault(name, [])
        if why is None:
            rewards[name].append(reward)
        else:
            failed[name].append(why)
        failures = trials.exceptions(trial)
        if failures:
            errors.setdefault(name, trials.described(failures[0]))
    tasks = {
        name: {
            "attempts": rewards[name],
            "score": grading.task_result(rewards[name], len(failed[name]), rule),
            "errored": len(failed[name]),
            **({"group": (groups or {})[name]} if name in (groups or {}) else {}),
        }
        for name in sorted(rewards)
    }
    errored = {name: failed[name][0] for name, task in tasks.items() if task["score"] is None}
    n_scored = sum(len(scores) for scores in rewards.values())
    n_errored = sum(len(whys) for whys in failed.values())
    limited = {}
    n_limit = _whole(env, "HARBOR_N_TASKS", 1)
    if n_limit and not task_names(env) and dataset_tasks is not None:
        limited = {"n_tasks_total": dataset_tasks, "task_limit": f"HARBOR_N_TASKS={n_limit}"}
    return {
        "score": grading.run_result([task["score"] for task in tasks.values()]),
        "grading": rule,
        "attempts": _attempts(env),
        "pass_threshold": grading.PASS_THRESHOLD,
        "tasks": tasks,
        "errored": errored,
        "errors": dict(sorted(errors.items())),
        "n_trials": n_scored + n_errored,
        "n_scored": n_scored,
        "n_errored": n_errored,
        "agent": env.get("HARBOR_AGENT", "").strip() or "belvedir",
        "model": (env.get("HARBOR_MODEL") or env.get("MODEL") or "").strip() or None,
        "dataset": env.get("HARBOR_DATASET", "").strip() or TASKS_DATASET,
        "environment": environment_choice(env),
        "harbor_job": job_dir.name,
        "n_tasks": len(tasks),
        **limited,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m belvedir_harbor.run")
    parser.add_argument("--check", action="store_true", help="say what would run, and exit")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    workdir = Path.cwd()
    jobs_dir = workdir / JOBS_DIR
    script = shutil.which("harbor")
    # Harbor imports while the dataset is fetched (belvedir_harbor.prestart).
    early = None if args.check or script is None else Prestarted.start(script, harbor_env(env))
    try:
        # An agent that installs itself needs the dataset's word on what its images hold, so
        # the dataset is fetched before the check, at --check too (the install step, where
        # an offline install stops before Harbor starts).
        downloads = agents.downloads_agent(env, modal=uses_modal(env))
        dataset_path = prepare_dataset(env, workdir, check=args.check and not downloads)
        agent_downloads_check(env, dataset_path)
        command = harbor_command(env, dataset_path, jobs_dir)
    except Refused as exc:
        if early is not None:
            early.cancel()
        note(str(exc))
        return 2
    if not uses_modal(env) and (env.get("MODAL_TOKEN_ID") or env.get("MODAL_TOKEN_SECRET")):
        note("only one of MODAL_TOKEN_ID / MODAL_TOKEN_SECRET is set: using task sandboxes.")
    if script is None:
        note("Harbor is not installed here (PyPI harbor, Python >= 3.12); cannot run the tasks.")
        return 0 if args.check else 2
    print("belvedir-harbor: " + " ".join(command), flush=True)
    if args.check:
        return 0
    shutil.rmtree(jobs_dir, ignore_errors=True)
    if early is not None:
        returncode = early.run(command)
    else:
        returncode = subprocess.run(command, env=harbor_env(env)).returncode
    if returncode != 0:
        note(f"harbor run exited with {returncode}.")
        return returncode
    try:
        groups = task_groups(dataset_path)
        results = read_job(jobs_dir, env, dataset_size(dataset_path), groups)
    except (ValueError, OSError) as exc:
        note(str(exc))
        return 2
    Path("results.json").write_text(json.dumps(results, indent=1) + "\n")
    for name, error in results["errors"].items():
        note(f"task {name}: {error}")
    if results["score"] is None:
        note(
            f"every trial errored ({results['n_errored']} of {results['n_trials']}), so there "
            "is no score: see errored in results.json."
        )
        return 3
    print(
        f"belvedir-harbor: score {results['score']:.4f} ({results['grading']}) over "
        f"{results['n_scored']} of "
        f"{results['n_trials']} trials ({results['n_errored']} errored, not scored)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
