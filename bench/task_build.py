"""A task image's build: the platform's path (the split builder) beside `docker build`, and
optionally a real builder (Debian's buildah) inside a gVisor sandbox.

    .venv/bin/python bench/task_build.py [--rounds 3] [--runtime runsc] [--no-buildah]
                                         [--buildah-driver overlay|vfs]

The sample task is the Harbor export of the end-to-end tests' `state_diff` task (the export
the platform hands Harbor, `harnesses.harbor_export`), FROM the local sandbox image since no
registry is reachable: `FROM`, `USER root`, one `RUN mkdir`, `COPY state/`, `WORKDIR`,
`STOPSIGNAL`. Its environment directory is sent as a tar.gz, as the Harbor environment sends it.

- **platform**: `sandboxes.tasks.ensure_image(..., steps=step_limits(spec, ...))`, the
  call `harbor.services` makes (its RUN steps under `--runtime`, on the sandbox network,
  with the task sandbox's limits and capabilities). *cold*: `force=True` (no builder cache);
  *image exists*: the same tag again (the engine has it); *cached layers, new tag*: a tag
  the engine lacks, `force=False` (the pieces' builder cache; `RUN` steps have none).
- **baseline**: `docker build` of the same tar.gz under the engine's default runtime (runc,
  the classic builder): *cold* `--no-cache`, *cached layers, new tag* with the cache.
- **buildah in gVisor** (unless `--no-buildah`): an image of the sandbox image plus Debian's
  `buildah` (built here on first use, `apt-get` from Debian's mirrors), run under `--runtime`
  on a network of its own (`--internal`), every capability dropped but the task ones plus
  SYS_ADMIN and SYS_CHROOT (gVisor's, not the host's), `no-new-privileges`, its storage a
  tmpfs in gVisor's memory (gVisor's gofer refuses the base image's device nodes on any
  host-backed directory). Timed per phase: *start* (`docker run -d`), *import* (`buildah pull
  docker-archive:` of the base image's `docker save`, made once before the rounds and timed
  apart), *build* (`buildah bud --isolation chroot --layers`), *export* (`buildah push
  docker-archive:`), *load* (`docker load` on the host). *cold*: a fresh builder each time;
  *cached layers, new tag*: a second build in the same builder (its layers kept).

One warm-up round (not counted), then `--rounds` rounds, the paths' order rotated each round;
medians, with the 1-minute load average when each figure was taken (the machine is shared).
Cleans up its images, containers and network; exits 0 unless something errored.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import inspect
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the project on sys.path)
import docker
from _common import median, table

from harnesses.harbor_export import ExportOptions, export_files
from sandboxes.base import SandboxSpec
from sandboxes.network import NetworkConfig
from sandboxes.tasks import TASK_CAPABILITIES, ensure_image, step_limits
from tests.helpers.harbor import FOUR_KINDS

BASE_IMAGE = os.environ.get("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:latest")
LABEL = "belvedir.bench"
LABEL_VALUE = "task_build"
MEMORY, CPUS, PIDS = "4g", 2.0, 512
DISK = 10 * 2**30  # BELVEDIR_SANDBOX_DISK's default: what the RUN steps may write
TIMEOUT = 900
TIME_CAP_S = 1200
# The managed Harbor end-to-end tests' state_diff task (a COPY of its files, a RUN).
SAMPLE_TASK = next(t for t in FOUR_KINDS if t.get("verifier", {}).get("kind") == "state_diff")
BUILDAH_RECIPE = f"""FROM {BASE_IMAGE}
USER root
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends buildah netavark \\
 && rm -rf /var/lib/apt/lists/*
"""
BUILDAH_REPOSITORY = "belvedir-bench-buildah"
# Inside the builder: buildah's own flags (the storage in gVisor's memory, chroot isolation,
# the RUN steps' capabilities those of a task sandbox: buildah's default set less SETFCAP,
# which the builder lacks, and SYS_CHROOT; the builder's open-files limit).
BUILD_FLAGS = "--isolation chroot --pull=never --layers --ulimit nofile=20000:20000"
BUILD_FLAGS += " --cap-drop SETFCAP --cap-drop SYS_CHROOT"


def sample_context() -> bytes:
    """The sample task's environment/ directory (the Harbor export's) as a tar.gz."""
    files = export_files([SAMPLE_TASK], ExportOptions(base_image=BASE_IMAGE))
    prefix = f"{SAMPLE_TASK['id']}/environment/"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for item in files:
            if item.path.startswith(prefix):
                info = tarfile.TarInfo(item.path.removeprefix(prefix))
                info.size, info.mode = len(item.content), 0o755 if item.executable else 0o644
                tar.addfile(info, io.BytesIO(item.content))
    return buffer.getvalue()


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def docker_cli(*args: str, stdin: bytes | None = None, timeout: float = TIMEOUT) -> str:
    done = subprocess.run(["docker", *args], input=stdin, capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])}: {done.stderr.decode()[-1500:]}")
    return done.stdout.decode()


class Platform:
    """The split builder, through the platform's own call."""

    def __init__(self, client: docker.DockerClient, context: Path, runtime: str, network: str):
        self.client, self.context, self.made = client, context, set()
        spec = SandboxSpec(
            run_id="bench-task-build",
            image=BASE_IMAGE,
            command=["true"],
            network=network,
            cpus=CPUS,
            memory=MEMORY,
            pids=PIDS,
            runtime=runtime,
            user="",
            cap_add=TASK_CAPABILITIES,
        )
        # Before and after issue 21 (the same script measures both): what the platform's
        # call takes, as harbor.services makes it, from the signatures it finds.
        labels = {LABEL: LABEL_VALUE}
        if "disk" in inspect.signature(step_limits).parameters:
            self.steps = step_limits(spec, labels, disk=DISK)
        else:
            self.steps = step_limits(spec, labels)
        accepts = inspect.signature(ensure_image).parameters
        self.extra: dict = {"network": network, "memory": MEMORY}
        self.extra = {k: v for k, v in self.extra.items() if k in accepts}
        if "policy" in accepts:
            from sandboxes import taskpolicy

            self.extra["policy"] = taskpolicy.Policy(
                bases=(BASE_IMAGE,), organization="org_bench_task_build", disk=DISK
            )

    def _build(self, tag: str, force: bool) -> tuple[float, bool]:
        self.made.add(tag)
        started = time.perf_counter()
        cached = ensure_image(
            self.client,
            context=self.context,
            tag=tag,
            timeout=TIMEOUT,
            force=force,
            steps=self.steps,
            **self.extra,
        )
        return time.perf_counter() - started, cached

    def round(self, n: int) -> dict[str, float]:
        tag = f"belvedir-task:bench-{os.getpid()}-{n}"
        cold, cached = self._build(tag, force=True)
        assert not cached
        exists, cached = self._build(tag, force=False)
        assert cached
        again, cached = self._build(f"{tag}-new", force=False)
        assert not cached
        return {"cold": cold, "image exists": exists, "cached layers, new tag": again}

    def clean(self) -> None:
        for tag in self.made:
            try:
                self.client.images.remove(tag, force=True)
            except docker.errors.DockerException:
                pass


class Baseline:
    """`docker build` of the same tar.gz (the engine's default runtime, its builder cache)."""

    def __init__(self, context: bytes):
        self.context, self.made = context, set()

    def _build(self, tag: str, *flags: str) -> float:
        self.made.add(tag)
        started = time.perf_counter()
        docker_cli("build", "-q", "-t", tag, *flags, "-", stdin=self.context)
        return time.perf_counter() - started

    def round(self, n: int) -> dict[str, float]:
        tag = f"belvedir-task:bench-baseline-{os.getpid()}-{n}"
        cold = self._build(tag, "--no-cache")
        again = self._build(f"{tag}-new")
        return {"cold": cold, "cached layers, new tag": again}

    def clean(self) -> None:
        for tag in self.made:
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


class Buildah:
    """Debian's buildah in a gVisor sandbox; the image it builds loaded into the engine."""

    def __init__(self, context: bytes, runtime: str, driver: str, workdir: Path):
        self.runtime, self.driver, self.workdir = runtime, driver, workdir
        self.network = f"belvedir-bench-buildah-{os.getpid()}"
        self.made: set[str] = set()
        self.builders: list[str] = []
        (workdir / "context.tar.gz").write_bytes(context)
        (workdir / "out").mkdir()
        digest = hashlib.sha256(BUILDAH_RECIPE.encode()).hexdigest()[:12]
        self.image = f"{BUILDAH_REPOSITORY}:{digest}"
        self.prepared: dict[str, float] = {}

    def prepare(self) -> None:
        """The builder image (built once, kept), the base image's archive, the network."""
        if not docker_cli("images", "-q", self.image).strip():
            started = time.perf_counter()
            docker_cli("build", "-q", "-t", self.image, "-", stdin=BUILDAH_RECIPE.encode())
            self.prepared["builder image (once)"] = time.perf_counter() - started
        started = time.perf_counter()
        docker_cli("save", "-o", str(self.workdir / "base.tar"), BASE_IMAGE)
        self.prepared["docker save of the base (once per base image)"] = (
            time.perf_counter() - started
        )
        docker_cli("network", "create", "--internal", "--label", f"{LABEL}={LABEL_VALUE}",
                   self.network)  # fmt: skip

    def _exec(self, builder: str, command: str) -> float:
        started = time.perf_counter()
        docker_cli("exec", builder, "sh", "-c", command)
        return time.perf_counter() - started

    def _build_export_load(self, builder: str, tag: str) -> dict[str, float]:
        out = f"/out/{tag.replace(':', '_')}.tar"
        times = {
            "build": self._exec(
                builder,
                f"buildah --storage-driver {self.driver} bud {BUILD_FLAGS} -q -t {tag} /ctx",
            ),
            "export": self._exec(
                builder,
                f"buildah --storage-driver {self.driver} push -q {tag} docker-archive:{out}:{tag}",
            ),
        }
        host = self.workdir / "out" / Path(out).name
        started = time.perf_counter()
        docker_cli("load", "-q", "-i", str(host))
        times["load"] = time.perf_counter() - started
        host.unlink()
        self.made.add(tag)
        return times

    def round(self, n: int) -> dict[str, dict[str, float]]:
        name = f"belvedir-bench-buildah-{os.getpid()}-{n}"
        caps = ["--cap-drop", "ALL"]
        for cap in (*TASK_CAPABILITIES, "SYS_ADMIN", "SYS_CHROOT"):
            caps += ["--cap-add", cap]
        started = time.perf_counter()
        docker_cli(
            "run", "-d", "--name", name, "--runtime", self.runtime, "--network", self.network,
            *caps, "--security-opt", "no-new-privileges", "--init",
            "--memory", MEMORY, "--memory-swap", MEMORY, "--cpus", str(CPUS),
            "--pids-limit", str(PIDS), "--label", f"{LABEL}={LABEL_VALUE}",
            "--tmpfs", f"/var/lib/containers:exec,size={MEMORY}",
            "-v", f"{self.workdir / 'base.tar'}:/in/base.tar:ro",
            "-v", f"{self.workdir / 'context.tar.gz'}:/in/context.tar.gz:ro",
            "-v", f"{self.workdir / 'out'}:/out",
            self.image, "sleep", "infinity",
        )  # fmt: skip
        self.builders.append(name)
        try:
            cold = {"start": time.perf_counter() - started}
            cold["import"] = self._exec(
                name,
                f"buildah --storage-driver {self.driver} pull -q docker-archive:/in/base.tar"
                " && mkdir /ctx && tar -xzf /in/context.tar.gz -C /ctx",
            )
            tag = f"belvedir-task:bench-buildah-{os.getpid()}-{n}"
            cold.update(self._build_export_load(name, tag))
            cold["total"] = sum(cold.values())
            again = self._build_export_load(name, f"{tag}-new")
            again["total"] = sum(again.values())
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True)
            self.builders.remove(name)
        return {"cold": cold, "cached layers, new tag": again}

    def clean(self) -> None:
        for name in self.builders:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        for tag in self.made:  # docker load tags it twice: as pushed, and as buildah named it
            subprocess.run(["docker", "rmi", "-f", tag, f"localhost/{tag}"], capture_output=True)
        subprocess.run(["docker", "network", "rm", self.network], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (after a warm-up)")
    parser.add_argument("--runtime", default="runsc", help="the sandboxes' runtime")
    parser.add_argument("--no-buildah", action="store_true", help="skip buildah in gVisor")
    parser.add_argument("--buildah-driver", default="overlay", choices=["overlay", "vfs"])
    args = parser.parse_args()
    client = docker.from_env()
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        print(f"no {BASE_IMAGE} on the engine (make sandbox-image)", file=sys.stderr)
        return 1
    network = NetworkConfig.from_env().name
    workdir = Path(tempfile.mkdtemp(prefix="belvedir-bench-build-"))
    context = sample_context()
    (workdir / "context.tar.gz").write_bytes(context)
    paths: dict[str, Platform | Baseline | Buildah] = {
        "platform": Platform(client, workdir / "context.tar.gz", args.runtime, network),
        "baseline": Baseline(gzip.decompress(context)),
    }
    if not args.no_buildah:
        (workdir / "buildah").mkdir()
        paths["buildah"] = Buildah(context, args.runtime, args.buildah_driver, workdir / "buildah")
    results: dict[str, list[tuple[dict, str]]] = {name: [] for name in paths}
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    try:
        if "buildah" in paths:
            paths["buildah"].prepare()
            for what, seconds in paths["buildah"].prepared.items():
                print(f"buildah: {what}: {seconds:.1f} s (load {load()})", flush=True)
        for n in range(args.rounds + 1):
            if time.monotonic() - started > TIME_CAP_S:
                print(f"time cap of {TIME_CAP_S} s reached after {n - 1} rounds", file=sys.stderr)
                break
            names = list(paths)
            names = names[n % len(names) :] + names[: n % len(names)]
            for name in names:
                got = paths[name].round(n)
                label = "warm-up" if n == 0 else f"round {n}"
                if n > 0:
                    results[name].append((got, load()))
                shown = {
                    k: (v["total"] if isinstance(v, dict) else v) for k, v in got.items()
                }  # fmt: skip
                figures = ", ".join(f"{k} {v:.2f} s" for k, v in shown.items())
                print(f"{label:>8} {name:>8}: {figures} (load {load()})", flush=True)
    finally:
        for path in paths.values():
            path.clean()
        client.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if not any(results.values()):
        print("no measured rounds", file=sys.stderr)
        return 1
    report(results, args)
    return 0


def report(results: dict[str, list[tuple[dict, str]]], args) -> None:
    rows = []
    base = {}
    for got, _ in results["baseline"]:
        for case, seconds in got.items():
            base.setdefault(case, []).append(seconds)
    labels = {
        "platform": f"platform (split builder, RUN under {args.runtime})",
        "baseline": "baseline (docker build, runc)",
        "buildah": f"buildah in {args.runtime} ({args.buildah_driver}, end to end)",
    }
    for name, rounds in results.items():
        if not rounds:
            continue
        loads = [float(x) for _, x in rounds]
        for case in rounds[0][0]:
            values = [g[case]["total"] if name == "buildah" else g[case] for g, _ in rounds]
            ratio = median(values) / median(base[case]) if case in base else float("nan")
            rows.append(
                [
                    labels[name],
                    case,
                    f"{median(values):.3f}",
                    f"{min(values):.3f}-{max(values):.3f}",
                    "-" if ratio != ratio else f"{ratio:.1f}x",
                    f"{min(loads):.1f}-{max(loads):.1f}",
                ]
            )
    print()
    print(f"the sample task's image, {len(results['platform'])} rounds (seconds, medians):")
    header = ["path", "case", "median", "range", "vs docker build", "load"]
    print(table(rows, header))
    if results.get("buildah"):
        print()
        print("buildah in gVisor by phase (seconds, medians):")
        phases = ["start", "import", "build", "export", "load"]
        rows = []
        for case in results["buildah"][0][0]:
            got = [g[case] for g, _ in results["buildah"]]
            rows.append([case] + [f"{median([g[p] for g in got]):.2f}" if p in got[0] else "-"
                                  for p in phases])  # fmt: skip
        print(table(rows, ["case", *phases]))


if __name__ == "__main__":
    sys.exit(main())
