"""A realistic install step under runc and under gVisor (runsc), side by side.

    sudo .venv/bin/python bench/install_step.py [--runs 3] [--packages requests openai]

What a harness's install command typically does, in a sandbox set up as the platform sets
it up (the isolated network `belvedir-sandbox`, user 1000, no capabilities, the platform's
CPU/memory/pids limits, a read-only root filesystem with the workdir, /tmp and the home on a
per-sandbox disk quota volume): `python3 -m venv v && v/bin/pip install PACKAGE` from a
local wheel cache served on the sandbox network's gateway IP (no index, so the network
and PyPI's speed are out of the figures), then `import PACKAGE`.

Per runtime and package: the wall time of the whole `docker run` (create, start, the step,
exit, removal) and, timed inside the container, the venv creation and the `pip install`.
One warm-up of each, then `--runs` of each, alternating which runtime goes first. Needs
root (the quota volume is a loop mount), the sandbox network (scripts/sandbox-network.sh)
and both runtimes registered (scripts/ensure-docker.sh). Wheels for the sandbox's Python
3.13 are downloaded once (pip download, from PyPI) into $BELVEDIR_CACHE_DIR/wheels/.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common  # noqa: F401  (puts the project on sys.path)
from _common import median, table

from sandboxes import diskquota
from sandboxes.network import NetworkConfig, problems

IMAGE = os.environ.get("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:latest")
CACHE = Path(os.environ.get("BELVEDIR_CACHE_DIR", "/var/cache/belvedir")) / "wheels"
RUNTIMES = ["runc", "runsc"]
CPUS, MEMORY, PIDS = "2", "4g", "512"
TIME_CAP_S = 480
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
PLATFORMS += ["manylinux_2_5_x86_64", "manylinux1_x86_64"]
STEP = (
    "set -e; s=$(date +%s.%N); python3 -m venv v; m=$(date +%s.%N); "
    "v/bin/pip install -q --no-index --trusted-host {host} --find-links {index} {package}; p=$(date +%s.%N); "
    "v/bin/python -c 'import {module}'; echo TIMES $s $m $p"
)


def wheels_for(packages: list[str]) -> Path:
    """A folder with every wheel `packages` need on the sandbox's Python 3.13."""
    digest = hashlib.sha256(repr(sorted(packages)).encode()).hexdigest()[:12]
    target = CACHE / f"install-bench-{digest}"
    if (target / ".complete").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "pip", "download", "-q", "-d", str(target)]
    args += ["--only-binary=:all:", "--python-version", "3.13", "--implementation", "cp"]
    args += ["--abi", "cp313"] + [f"--platform={p}" for p in PLATFORMS] + packages
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"pip download failed: {done.stderr[-2000:]}")
    (target / ".complete").write_text("")
    return target


def serve(folder: Path, config: NetworkConfig) -> tuple[http.server.ThreadingHTTPServer, str]:
    """The wheel folder as a find-links page on the gateway IP, in the sandbox port range."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    low, high = config.port_range()
    ports = list(range(low, high + 1))
    random.shuffle(ports)
    for port in ports:
        try:
            server = http.server.ThreadingHTTPServer(
                (config.gateway, port), functools.partial(Quiet, directory=str(folder))
            )
        except OSError:
            continue
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://{config.gateway}:{port}/"
    raise RuntimeError(f"no free port on {config.gateway} in {config.ports}")


def install_once(
    *, runtime: str, package: str, index: str, root: Path, config: NetworkConfig, tag: str
) -> dict[str, float]:
    folders = {
        "workspace": diskquota.Folder(),
        "tmp": diskquota.Folder(mode=0o1777),
        "home": diskquota.Folder(mode=0o700),
    }
    volume = diskquota.allocate(
        root=root, name=f"bench-{tag}", size_bytes=2 * 2**30, folders=folders, uid=1000, gid=1000
    )
    module = package.replace("-", "_")
    try:
        args = ["docker", "run", "--rm", "--runtime", runtime, "--network", config.name]
        args += ["--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        args += ["--init", "--pids-limit", PIDS, "--cpus", CPUS, "--memory", MEMORY]
        args += ["--memory-swap", MEMORY, "--read-only", "-w", "/workspace"]
        for name, target in [
            ("workspace", "/workspace"),
            ("tmp", "/tmp"),
            ("home", "/home/sandbox"),
        ]:
            args += ["-v", f"{volume.folder(name)}:{target}"]
        args += ["--label", "belvedir.bench=install_step", IMAGE, "bash", "-c"]
        args.append(STEP.format(index=index, host=config.gateway, package=package, module=module))
        started = time.perf_counter()
        done = subprocess.run(args, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - started
    finally:
        diskquota.release(root=root, name=volume.name)
    marks = [line for line in done.stdout.splitlines() if line.startswith("TIMES ")]
    if done.returncode != 0 or not marks:
        raise RuntimeError(f"{runtime} {package}: exit {done.returncode}: {done.stderr[-1500:]}")
    s, m, p = (float(x) for x in marks[-1].split()[1:])
    return {"wall": wall, "venv": m - s, "pip install": p - m}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs per runtime and package")
    parser.add_argument("--packages", nargs="+", default=["requests", "openai"])
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (the disk quota volume is a loop mount)", file=sys.stderr)
        return 1
    config = NetworkConfig.from_env()
    missing = problems(config)
    if missing:
        print("the sandbox network is not in place: " + "; ".join(missing), file=sys.stderr)
        return 1
    info = subprocess.run(
        ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True
    )
    for runtime in RUNTIMES:
        if f'"{runtime}"' not in info.stdout:
            print(f"the Docker engine has no {runtime} runtime", file=sys.stderr)
            return 1
    folder = wheels_for(args.packages)
    server, index = serve(folder, config)
    root = Path(tempfile.mkdtemp(prefix="belvedir-bench-install-"))
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    started = time.monotonic()
    try:
        for i in range(args.runs + 1):
            if time.monotonic() - started > TIME_CAP_S:
                print(f"time cap of {TIME_CAP_S} s reached after {i - 1} runs", file=sys.stderr)
                break
            for package in args.packages:
                order = RUNTIMES if i % 2 == 0 else RUNTIMES[::-1]
                line = []
                for runtime in order:
                    tag = f"{os.getpid()}-{i}-{runtime}-{package}"
                    got = install_once(
                        runtime=runtime, package=package, index=index, root=root,
                        config=config, tag=tag,
                    )  # fmt: skip
                    if i > 0:
                        results.setdefault((runtime, package), []).append(got)
                    line.append(f"{runtime} {got['wall']:6.2f} s")
                label = "warm-up" if i == 0 else f"run {i}"
                print(f"{label:>8} {package:>10}: " + "   ".join(line), flush=True)
    finally:
        server.shutdown()
        server.server_close()
        for name in diskquota.volume_names(root=root):
            diskquota.release(root=root, name=name)
        shutil.rmtree(root, ignore_errors=True)
    if not results:
        print("no measured runs", file=sys.stderr)
        return 1
    rows = []
    for package in args.packages:
        base = results.get(("runc", package))
        for runtime in RUNTIMES:
            runs = results.get((runtime, package))
            if not runs:
                continue
            walls = [r["wall"] for r in runs]
            ratio = median(walls) / median([r["wall"] for r in base]) if base else float("nan")
            rows.append(
                [
                    package,
                    runtime,
                    f"{median(walls):.2f}",
                    f"{min(walls):.2f}-{max(walls):.2f}",
                    f"{median([r['venv'] for r in runs]):.2f}",
                    f"{median([r['pip install'] for r in runs]):.2f}",
                    f"{ratio:.2f}x",
                ]
            )
    print()
    print(f"venv + pip install from a local wheel cache, {args.runs} runs each (seconds, medians):")
    header = ["package", "runtime", "docker run", "range", "venv", "pip install", "vs runc"]
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
