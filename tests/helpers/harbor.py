"""Harbor itself, for the tests that check the Harbor export with it.

Harbor (PyPI `harbor`) needs Python >= 3.12 and Docker Compose v2; it runs in the image
`scripts/harbor-image.sh` builds from the sandbox image (built once, then reused), and drives
this machine's Docker engine through its socket. Paths given to Harbor are mounted at the same
place inside, because the task containers' bind mounts are resolved by the engine on the host.
"""

import json
import subprocess
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOCKET = "/var/run/docker.sock"

# An environment holding each verifier kind once, with recorded answers and golden files.
FOUR_KINDS = [
    {"id": "capital", "prompt": "What is the capital of France?", "answer": "Paris"},
    {
        "id": "refund",
        "prompt": "A customer asks for a refund after 40 days. What do you answer?",
        "answer": "Refunds are possible for 30 days; after that we offer store credit.",
        "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy", "Offers credit"]},
        "metadata": {"topic": "billing", "level": None},
    },
    {
        "id": "sum",
        "prompt": "What is 2+2? Answer with the number only.",
        "answer": "4",
        "verifier": {
            "kind": "code",
            "source": "def verify(answer, state):\n    return answer.strip() == '4'\n",
        },
    },
    {
        "id": "todo",
        "prompt": "Tick the first item of notes/todo.txt.",
        "answer": "Ticked.",
        "verifier": {
            "kind": "state_diff",
            "setup_state": {"notes/todo.txt": "[ ] buy milk\n[ ] walk the dog\n"},
            "golden": {"notes/todo.txt": "[x] buy milk\n[ ] walk the dog\n"},
        },
    },
]


# The task containers on the host's network, so a verifier reaches a judge on 127.0.0.1 (tests
# talk to 127.0.0.1 only). A test-only overlay: the export itself leaves networking to Harbor.
HOST_NETWORK_OVERLAY = "services:\n  main:\n    network_mode: host\n"


def _built(script: str) -> str:
    """The tag scripts/`script` prints, building its image the first time (then cached)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / script)], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, f"scripts/{script} failed:\n{done.stderr[-3000:]}"
    return done.stdout.strip().splitlines()[-1]


def harbor_image() -> str:
    """The Harbor image's tag, building it the first time (a few minutes, then cached)."""
    return _built("harbor-image.sh")


def claude_code_image() -> str:
    """The task base image with Claude Code (`make claude-code-image`), built the first time."""
    return _built("claude-code-image.sh")


def harbor(image: str, workdir: Path, *args: str, env: dict[str, str] | None = None, timeout=900):
    """Run `args` (e.g. `harbor run ...`) in the Harbor image, with `workdir` mounted at the
    same path; returns the CompletedProcess (text)."""
    command = ["docker", "run", "--rm", "--network", "host", "-v", f"{SOCKET}:{SOCKET}"]
    command += ["-v", f"{workdir}:{workdir}", "-w", str(workdir)]
    # LiteLLM (imported by Harbor) would fetch a price list from GitHub; keep it local.
    for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}.items():
        command += ["-e", f"{key}={value}"]
    command += [image, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


LOAD_TASKS = """
import json, sys
from harbor.models.task.task import Task
loaded = {}
for path in sys.argv[1:]:
    task = Task(path)
    loaded[task.name] = {
        "valid": Task.is_valid_dir(path),
        "verifier_env": task.config.verifier.env,
        "instruction_ends": task.instruction.strip().splitlines()[-1],
    }
print(json.dumps(loaded))
"""


def load_tasks(image: str, workdir: Path, task_dirs: list[Path]) -> dict:
    """Each task directory read by Harbor's own task model: {name: what it read}."""
    done = harbor(image, workdir, "python", "-c", LOAD_TASKS, *map(str, task_dirs))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_job(image: str, workdir: Path, dataset: Path, agent: str, env: dict[str, str]) -> dict:
    """`harbor run -p DATASET -a AGENT -y` into workdir/jobs-<agent>; returns the job's
    result.json with {"trials": {task name: reward}} added from each trial's verifier, and
    {"stops": {task name: seconds}}: from the verifier's end to the trial's (its teardown)."""
    overlay = workdir / "host-network.yaml"
    overlay.write_text(HOST_NETWORK_OVERLAY)
    jobs = workdir / f"jobs-{agent}"
    done = harbor(
        image,
        workdir,
        *("harbor", "run", "-p", str(dataset), "-a", agent, "-y", "-n", "4"),
        *("-o", str(jobs), "--extra-docker-compose", str(overlay)),
        env=env,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    (job,) = [p for p in jobs.iterdir() if p.is_dir()]
    result = json.loads((job / "result.json").read_text())
    result["trials"], result["stops"] = {}, {}
    for trial in job.iterdir():
        reward = trial / "verifier" / "reward.txt"
        if trial.is_dir() and reward.exists():
            result["trials"][trial.name.rsplit("__", 1)[0]] = float(reward.read_text())
            result["stops"][trial.name.rsplit("__", 1)[0]] = _stop_seconds(trial)
    result["log"] = done.stdout
    return result


def _stop_seconds(trial: Path) -> float:
    result = json.loads((trial / "result.json").read_text())
    ended, verified = (
        datetime.fromisoformat(at.replace("Z", "+00:00"))
        for at in (result["finished_at"], result["verifier"]["finished_at"])
    )
    return (ended - verified).total_seconds()


def mean_reward(result: dict) -> float:
    (evaluation,) = result["stats"]["evals"].values()
    return evaluation["metrics"][0]["mean"]
