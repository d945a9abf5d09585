"""A managed Harbor run through the platform beside Harbor's own Docker environment.

    .venv/bin/python bench/harbor_managed.py [--rounds 2] [--keep-logs DIR] [--keep-db]

The same exported 4-task environment (the four verifier kinds of the Harbor tests,
`tests/helpers/harbor.py` FOUR_KINDS, FROM the local sandbox image: no registry is
reachable), Harbor's `oracle` agent, concurrency 4, side by side in one run:

* **Harbor's own**: the environment exported as `belvedir environments export` writes it
  (GET /api/v1/environments/{id}/export, unpacked by the CLI's own code), then
  `harbor run -p ./env -a oracle -y -n 4` in the Harbor image (`belvedir-harbor:0.26.0`,
  under runc) on this machine's engine through its socket, as docs/harbor.md runs it: Harbor's
  Docker environment, compose, runc task containers, on the host's network
  (`--extra-docker-compose`, so the verifiers reach the judge). Timed from `docker run` to its
  exit.
* **the platform**: a managed Harbor harness made from the same environment (the
  Runner-on-Harbor card, `HARBOR_AGENT=oracle`, `HARBOR_CONCURRENCY=4`), launched with
  POST /api/v1/runs with a project key and read with GET /api/v1/runs/<id> every 200 ms until
  it has finished, served as in production: uvicorn (the web app and the task-sandbox API),
  the sandbox gateway, the runs cluster (django-q2, its ORM broker: a queue in this
  benchmark's own database), the run's sandbox and every task sandbox under gVisor (`runsc`). Timed from the
  POST to the GET that reads it finished (succeeded, score 1).

Both sides' verifiers call the same judge (an OpenAI-compatible fake on the sandbox
network's gateway IP, every answer worth 1). One warm-up round of each (task images built
and cached, not counted), then `--rounds` rounds, alternating which side goes first.

The platform's time is broken down from probes in its own processes (bench/_harbor_probe.py:
uvicorn and the cluster run under it) into queue pick-up, clone, run sandbox start, driver
install and start, Harbor's import under gVisor, the tasks (per task: the create's slot,
image key, build or cache hit, container start, each exec, upload, download, the stop and
the time between calls), Harbor's end and the finish (bench/_harbor_report.py); the parts
must add up to the total within 10 %, else the benchmark fails (that checks the breakdown's
accounting, not the speed). Prints the load average with every figure (the machine is
shared). Uses database `belvedir_bench_harbor` (dropped at the end), cleans up its
containers, task images, warm sandboxes and processes; exits 0 unless something errored.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import _common
import queue_pickup
from _common import median, table
from _harbor_report import ADDS_UP, Missing, adds_up, run_breakdown
from queue_pickup import Process

DB_NAME = "belvedir_bench_harbor"
IMAGE = os.environ.get("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:latest")
HARBOR_IMAGE = os.environ.get("BELVEDIR_HARBOR_IMAGE", "belvedir-harbor:0.26.0")
RUNTIME = "runsc"
POLL_S = 0.2  # the client reads the run 5 times a second: its polling is load too
RUN_CAP_S = 300
TIME_CAP_S = 1500
JUDGE_KEY = "sk-bench-judge"
SOCKET = "/var/run/docker.sock"
VENV_BIN = Path(sys.executable).parent
PROBE = Path(__file__).resolve().parent / "_harbor_probe.py"


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def gateway_port(host: str, low: int, high: int, taken: set[int]) -> int:
    """A port on the gateway IP in the sandbox range that nothing listens on."""
    for port in range(low, high + 1):
        if port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high} on {host}")


def platform_env(url: str, tmp: Path, base_url: str, gateway: str, probe: Path) -> dict:
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        "PYTHONPATH": str(_common.ROOT),
        "DEBUG": "0",
        "LOG_LEVEL": "INFO",
        "BELVEDIR_DEV": "1",
        "BELVEDIR_BASE_URL": base_url,
        "BELVEDIR_SANDBOX_GATEWAY_UPSTREAM": base_url,
        "BELVEDIR_SANDBOX_BASE_URL": f"http://{gateway}",
        "BELVEDIR_SANDBOX_RUNTIME": RUNTIME,
        "BELVEDIR_SANDBOX_IMAGE": IMAGE,
        "BELVEDIR_HARBOR_IMAGE": HARBOR_IMAGE,
        "BELVEDIR_EXPORT_BASE_IMAGE": IMAGE,
        "BELVEDIR_SANDBOX_MEMORY": "2g",
        # A 1 GiB disk-quota volume for the run's sandbox (the driver writes a few MB) and no
        # extra reserve: the shared machine's disk is mostly promised to other sessions'
        # (sparse) spare volumes, and the platform refuses a sandbox it cannot promise room.
        "BELVEDIR_SANDBOX_DISK": "1G",
        "BELVEDIR_MIN_FREE_DISK": "0",
        "BELVEDIR_RUN_TIMEOUT": "600",
        "BELVEDIR_RUNS_PER_DAY_CAP": "10000",
        "BELVEDIR_CACHE_DIR": str(tmp / "cache"),
        "Q_WORKERS": "2",
        "BENCH_HARBOR_PROBE": str(probe),
    }
    env.pop("REDIS_URL", None)  # the ORM broker: a queue in this benchmark's own database
    if settings.BELVEDIR_INSTANCE:
        env["BELVEDIR_INSTANCE"] = settings.BELVEDIR_INSTANCE
    return env


class Judge:
    """The verifiers' judge where both sides reach it: on the gateway IP, every answer 1."""

    def __init__(self, host: str, port: int):
        from tests.traces.fake_openai import FakeOpenAI

        self.fake = FakeOpenAI(reply='{"score": 1, "reason": "fine"}', host=host, port=port)
        self.server = self.fake.__enter__()

    def close(self) -> None:
        self.fake.__exit__(None, None, None)


def export(http, base: str, environment_id: str, out: Path) -> None:
    """What `belvedir environments export --out` writes (the API's zip, the CLI's unpack)."""
    from belvedir.cli.environment_export import unpack

    answer = http.get(f"{base}/api/v1/environments/{environment_id}/export", timeout=60)
    answer.raise_for_status()
    unpack(zipfile.ZipFile(io.BytesIO(answer.content)), out)


def harbor_once(tmp: Path, dataset: Path, judge_base: str, n: int) -> dict[str, float]:
    overlay = tmp / "host-network.yaml"
    overlay.write_text("services:\n  main:\n    network_mode: host\n")
    jobs = tmp / f"jobs-{n}"
    command = ["docker", "run", "--rm", "--network", "host", "-v", f"{SOCKET}:{SOCKET}"]
    command += ["-v", f"{tmp}:{tmp}", "-w", str(tmp), "--label", "belvedir.bench=harbor_managed"]
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0"}
    env |= {"JUDGE_API_KEY": JUDGE_KEY, "JUDGE_MODEL": "acme/judge", "JUDGE_API_BASE": judge_base}
    for key, value in env.items():
        command += ["-e", f"{key}={value}"]
    command += [HARBOR_IMAGE, "harbor", "run", "-p", str(dataset), "-a", "oracle", "-y"]
    command += ["-n", "4", "-o", str(jobs), "--extra-docker-compose", str(overlay)]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_CAP_S)
    total = time.time() - started
    if done.returncode != 0:
        raise RuntimeError(f"harbor run exited {done.returncode}: {done.stdout[-2000:]}")
    (job,) = [p for p in jobs.iterdir() if p.is_dir()]
    result = json.loads((job / "result.json").read_text())
    (evaluation,) = result["stats"]["evals"].values()
    if evaluation["metrics"][0]["mean"] != 1.0:
        raise RuntimeError(f"Harbor's own oracle scored {evaluation['metrics'][0]}")
    return {"total": total}


def platform_once(http, base: str, launch: dict, probe: Path) -> dict:
    from runs.models import Run

    probe.write_text("")
    posted = time.time()
    answer = http.post(f"{base}/api/v1/runs", json=launch, timeout=60)
    answered = time.time()
    if answer.status_code != 201:
        raise RuntimeError(f"launch answered {answer.status_code}: {answer.text[:500]}")
    run_id = answer.json()["id"]
    status = "queued"
    while time.time() - posted < RUN_CAP_S:
        status = http.get(f"{base}/api/v1/runs/{run_id}", timeout=30).json()["status"]
        if status not in ("queued", "running"):
            break
        time.sleep(POLL_S)
    seen = time.time()
    run = Run.objects.get(pk=run_id)
    if status != "succeeded" or run.score != 1.0:
        raise RuntimeError(f"run {run_id} ended {status} ({run.score}): {run.notes} "
                           f"{run.log_tail[-3000:]}")  # fmt: skip
    # The client may read it finished before run_finish returns (its end's hooks remove the
    # run's task sandboxes first): wait for the worker's event.
    deadline = time.time() + 60
    while True:
        events = [json.loads(line) for line in probe.read_text().splitlines() if line.strip()]
        done = any(e["what"] == "run finished" and e.get("run") == run_id for e in events)
        if done or time.time() > deadline:
            break
        time.sleep(0.2)
    parts, total, tasks = run_breakdown(
        events, run=run_id, posted=posted, answered=answered, seen=seen
    )
    return {"run": run_id, "total": total, "parts": parts, "tasks": tasks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds (after a warm-up)")
    parser.add_argument("--keep-db", action="store_true", help=f"keep database {DB_NAME}")
    parser.add_argument("--keep-logs", type=Path, help="copy the processes' logs here")
    args = parser.parse_args()
    for image in (IMAGE, HARBOR_IMAGE):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            print(f"no {image} on the engine (make sandbox-image harbor-image)", file=sys.stderr)
            return 1
    tmp = Path(tempfile.mkdtemp(prefix="belvedir-bench-harbor-"))
    probe = tmp / "probe.jsonl"
    processes: list[Process] = []
    judge = None
    url = _common.database_recreate(DB_NAME)
    port = queue_pickup.free_port()
    base = f"http://127.0.0.1:{port}"  # the harness names the driver served here
    try:
        _common.django_setup(
            url,
            BELVEDIR_EXPORT_BASE_IMAGE=IMAGE,
            BELVEDIR_SANDBOX_IMAGE=IMAGE,
            BELVEDIR_DEV="1",
            BELVEDIR_BASE_URL=base,
        )
        import requests
        from django.conf import settings
        from django.db import connection

        from belvedir.models import Membership
        from belvedir.services import api_key_create, user_signup
        from billing.models import Kind
        from billing.services import ledger_operator_entry
        from harnesses.environments import environment_create, environment_harness_create
        from harnesses.services import harness_update
        from tests.helpers.harbor import FOUR_KINDS

        user = user_signup(
            email="bench@example.com", password="bench-password-1", organization_name="Bench"
        )
        project = Membership.objects.get(user=user).organization.projects.get()
        ledger_operator_entry(
            organization=project.organization, kind=Kind.CREDIT, amount_micros=10**9, note="bench"
        )
        _, key = api_key_create(project=project, name="bench", created_by=user)
        environment = environment_create(
            project=project, created_by=user, name="Four kinds", tasks=FOUR_KINDS
        )
        harness = environment_harness_create(environment=environment, preset="harbor-runner")
        harness = harness_update(
            harness=harness,
            env={**harness.env, "HARBOR_AGENT": "oracle", "HARBOR_CONCURRENCY": "4"},
        )
        connection.close()

        gateway_ip = settings.BELVEDIR_SANDBOX_GATEWAY
        low, _, high = settings.BELVEDIR_SANDBOX_PORTS.partition(":")
        taken: set[int] = set()
        judge = Judge(gateway_ip, gateway_port(gateway_ip, int(low), int(high), taken))
        judge_base = judge.fake.base_url
        gateway = f"{gateway_ip}:{gateway_port(gateway_ip, int(low), int(high), taken)}"
        env = platform_env(url, tmp, base, gateway, probe)
        web = Process("uvicorn", [sys.executable, str(PROBE), "web", "--port", str(port)],
                      env, _common.ROOT, tmp / "uvicorn.log")  # fmt: skip
        processes.append(web)
        web.wait_for(lambda: _answers(f"{base}/api/v1/runs"))
        gate = Process("gateway", [sys.executable, "manage.py", "sandbox_gateway", "--listen",
                       gateway], env, _common.ROOT, tmp / "gateway.log")  # fmt: skip
        processes.append(gate)
        gate.wait_for(lambda: b"sandbox gateway on " in (tmp / "gateway.log").read_bytes())
        cluster = Process("qcluster", [sys.executable, str(PROBE), "qcluster"],
                          {**env, "Q_CLUSTER_NAME": "runs"}, _common.ROOT,
                          tmp / "qcluster.log")  # fmt: skip
        processes.append(cluster)
        cluster.wait_for(lambda: b"running." in (tmp / "qcluster.log").read_bytes(), 120)
        time.sleep(1.0)

        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {key}"
        dataset = tmp / "env"
        export(http, base, environment.pk, dataset)
        launch = {"harness": harness.pk, "model": "oracle", "judge_model": "acme/judge",
                  "judge_api_base": judge_base, "judge_api_key": JUDGE_KEY}  # fmt: skip
        print(f"load average at start: {os.getloadavg()}", flush=True)
        harbor: list[tuple[dict, str]] = []
        platform: list[tuple[dict, str]] = []
        started = time.monotonic()
        for n in range(args.rounds + 1):
            if time.monotonic() - started > TIME_CAP_S:
                print(f"time cap of {TIME_CAP_S} s reached after {n - 1} rounds", file=sys.stderr)
                break
            steps = [
                ("harbor", lambda n=n: harbor_once(tmp, dataset, judge_base, n)),
                ("platform", lambda: platform_once(http, base, launch, probe)),
            ]
            if n % 2:
                steps.reverse()
            label = "warm-up" if n == 0 else f"round {n}"
            for name, step in steps:
                got = step()
                figure = (got, load())
                print(f"{label:>8} {name:>8}: {got['total']:6.2f} s (load {figure[1]})",
                      flush=True)  # fmt: skip
                if n > 0:
                    (harbor if name == "harbor" else platform).append(figure)
        return report(harbor, platform)
    except Missing as exc:
        print(f"the breakdown is missing an event: {exc}", file=sys.stderr)
        return 1
    finally:
        for process in reversed(processes):
            process.stop()
        if judge is not None:
            judge.close()
        clean_up()
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for path in [*tmp.glob("*.log"), probe]:
                if path.exists():
                    shutil.copy(path, args.keep_logs)
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep_db:
            _common.database_drop(DB_NAME)


def _answers(url: str) -> bool:
    import requests

    try:
        requests.get(url, timeout=2)
        return True
    except requests.ConnectionError:
        return False


def clean_up() -> None:
    """This benchmark's run sandboxes, task sandboxes, warm sandboxes and task images."""
    try:
        from belvedir.sandbox_config import get_backend
        from harbor.models import TaskSandbox
        from runs.models import Run

        run_ids = list(Run.objects.values_list("pk", flat=True))
        queue_pickup.run_overhead.cleanup_containers(run_ids)
        queue_pickup.INSTANCES.clear()
        queue_pickup.drain_warm_pools()
        release_spares()
        backend = get_backend()
        tags = set(TaskSandbox.objects.exclude(image="").values_list("image", flat=True))
        for image_id, image_tags, _ in backend.built_images():
            if tags.intersection(image_tags):
                backend.remove_image(image_id, image_tags)
    except Exception as exc:  # report, keep cleaning
        print(f"cleanup: {exc}", file=sys.stderr)


def release_spares() -> None:
    """The free spare volumes this benchmark's platform made (its instance's) released now,
    not left to a reaper's sweep."""
    from django.conf import settings

    from belvedir.sandbox_config import instance_id
    from sandboxes import diskquota, volumes

    root = Path(settings.BELVEDIR_SANDBOX_DATA_DIR)
    mine = instance_id()
    for name in diskquota.volume_names(root=root):
        if diskquota.spare_owner(root=root, name=name) == mine:
            if diskquota.claim_spare(root=root, name=name):
                volumes.release(root, name)


def report(harbor: list[tuple[dict, str]], platform: list[tuple[dict, str]]) -> int:
    if not harbor or not platform:
        print("no measured rounds", file=sys.stderr)
        return 1
    own = [g["total"] for g, _ in harbor]
    ours = [g["total"] for g, _ in platform]
    print("\nlaunch -> finished, the 4-task environment, oracle, concurrency 4 (seconds):")
    rows = [
        ["Harbor's own (docker, runc, compose)", *[f"{v:.2f}" for v in own],
         f"{median(own):.2f}", "1.00x", ", ".join(x for _, x in harbor)],
        ["managed through the platform (gVisor)", *[f"{v:.2f}" for v in ours],
         f"{median(ours):.2f}", f"{median(ours) / median(own):.2f}x",
         ", ".join(x for _, x in platform)],
    ]  # fmt: skip
    header = ["side", *[f"round {i + 1}" for i in range(len(own))], "median", "ratio", "load"]
    print(table(rows, header))
    failed = 0
    names = [name for name, _ in platform[0][0]["parts"]]
    print("\nthe platform's time, each round (seconds):")
    rows = [[name, *[f"{dict(g['parts'])[name]:.2f}" for g, _ in platform]] for name in names]
    sums = [sum(s for _, s in g["parts"]) for g, _ in platform]
    rows.append(["sum of the parts", *[f"{s:.2f}" for s in sums]])
    rows.append(["total (POST -> seen finished)", *[f"{g['total']:.2f}" for g, _ in platform]])
    print(table(rows, ["part", *[f"round {i + 1}" for i in range(len(platform))]]))
    for (got, _), n in zip(platform, range(1, len(platform) + 1), strict=True):
        ok, missing = adds_up(got["parts"], got["total"])
        print(f"round {n}: the parts add up to the total within {missing:.1%} "
              f"({'ok' if ok else f'over {ADDS_UP:.0%}: FAIL'})")  # fmt: skip
        failed += not ok
        for sandbox, (parts, total) in got["tasks"].items():
            ok, missing = adds_up(list(parts.items()), total)
            failed += not ok
            shown = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
            print(f"  {sandbox} {total:.2f} s: {shown}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
