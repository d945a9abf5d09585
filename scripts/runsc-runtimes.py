"""The gVisor runtimes the platform's Docker engines register, in one place (run with the
system python3 by scripts/ensure-docker.sh and scripts/second-engine.sh; no dependencies).

    runsc      CPU sandboxes (BELVEDIR_SANDBOX_RUNTIME)
    runsc-gpu  GPU sandboxes (BELVEDIR_GPU_RUNTIME's default): the same flags and
               --nvproxy=true

runsc's flags: ptrace works on every VM (no KVM needed); --network=host makes gVisor use the
network namespace Docker made for the container, so Docker's bridge and our rules apply to
it; --overlay2=none keeps writes to the root filesystem in the container's layer on the host
(as runc does: `docker commit` of a task build's RUN step and the disk watch see them), not
in gVisor's own filestore (its default since 2023).

--nvproxy=true is gVisor's GPU proxy (g3doc/user_guide/gpu.md: "The runsc flag --nvproxy
must be specified to enable GPU support", as in the pinned release, 20240729). Docker's GPU
device request adds nvidia-container-runtime-hook as a prestart hook; runsc with --nvproxy
sees it and runs `nvidia-container-cli configure` into the sandbox itself
(runsc/container/container.go), so nothing else is needed (--nvproxy-docker is deprecated
there). On a host without the NVIDIA driver the entry changes nothing: dockerd runs a runtime
only for a container that asks for it, and nothing there does (CPU sandboxes run under runsc,
simulated GPU runs too, and the GPU start-up check, belvedir/gpu_host.py, refuses real GPU
runs naming the driver and the toolkit the host lacks). A container started under runsc-gpu
there anyway fails at once: this release reads the host driver's version whenever --nvproxy
is on ("failed to get Nvidia driver version: failed to open /dev/nvidiactl",
runsc/sandbox/sandbox.go).

An operator's own runsc-gpu entry (another runsc that knows the host's driver, a forced ABI
with --nvproxy-driver-version: anything but runsc's path with these flags) is theirs: merge
keeps it as it is, and the start-up check judges it. runsc is always this platform's.

    runsc-runtimes.py merge DAEMON_JSON RUNSC  register both in DAEMON_JSON (what else it holds
                                               is kept); print each name registered anew
    runsc-runtimes.py write CONFIG RUNSC       a configuration of these runtimes alone
    runsc-runtimes.py check DAEMON_JSON        exit 0 when the engine's runtimes (`docker info
                                               --format '{{json .Runtimes}}'` on stdin) hold
                                               runsc and runsc-gpu as DAEMON_JSON registers them
"""

import contextlib
import json
import os
import sys
import tempfile

RUNSC_ARGS = ["--platform=ptrace", "--network=host", "--overlay2=none"]
GPU_ARGS = [*RUNSC_ARGS, "--nvproxy=true"]


def runtimes(runsc: str) -> dict[str, dict]:
    return {
        "runsc": {"path": runsc, "runtimeArgs": RUNSC_ARGS},
        "runsc-gpu": {"path": runsc, "runtimeArgs": GPU_ARGS},
    }


class BadConfig(Exception):
    """The daemon.json is not one this script can merge into: why."""


def _write(path: str, config: dict) -> None:
    """Replace the file at `path` (a symlink's target: config management's link stays) with
    `config`, atomically: a temp file of its own beside it, the old file's mode and owner,
    synced before the rename."""
    path = os.path.realpath(path)
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    try:
        old = os.stat(path)
    except FileNotFoundError:
        old = None
    descriptor, partial = tempfile.mkstemp(dir=directory, prefix=".daemon.json.")
    try:
        with os.fdopen(descriptor, "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(partial, old.st_mode & 0o7777 if old else 0o644)
        if old:
            os.chown(partial, old.st_uid, old.st_gid)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise


def _read(path: str) -> dict:
    try:
        with open(path) as f:
            config = json.load(f) if os.path.getsize(path) else {}
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise BadConfig(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise BadConfig(f"{path} holds a JSON {type(config).__name__}, not an object")
    runtimes = config.get("runtimes")
    if runtimes is not None and not (
        isinstance(runtimes, dict) and all(isinstance(v, dict) for v in runtimes.values())
    ):
        raise BadConfig(f'{path}: "runtimes" must be an object of objects')
    return config


def merge(path: str, runsc: str) -> list[str]:
    """Register the runtimes in the daemon.json at `path` (runsc-gpu where it has none, or
    ours: it follows runsc to a new path); the names whose entry changed."""
    config = _read(path)
    registered = config.get("runtimes") or {}
    config["runtimes"] = registered
    wanted = runtimes(runsc)
    ours = {"path": (registered.get("runsc") or {}).get("path"), "runtimeArgs": GPU_ARGS}
    if registered.get("runsc-gpu") not in (None, ours):
        del wanted["runsc-gpu"]  # the operator's own
    changed = [name for name, entry in wanted.items() if registered.get(name) != entry]
    if changed:
        registered.update(wanted)
        _write(path, config)
    return changed


def engine_has(seen: dict | None, path: str) -> bool:
    """Whether the engine's runtimes (`docker info`'s .Runtimes) hold runsc and runsc-gpu as
    the daemon.json at `path` registers them."""
    registered = _read(path).get("runtimes") or {}
    for name in ("runsc", "runsc-gpu"):
        entry, engine = registered.get(name) or {}, (seen or {}).get(name) or {}
        if engine.get("path") != entry.get("path"):
            return False
        if (engine.get("runtimeArgs") or []) != (entry.get("runtimeArgs") or []):
            return False
    return True


def main(argv: list[str]) -> int:
    try:
        return _main(argv)
    except BadConfig as exc:
        print(f"runsc-runtimes.py: {exc}", file=sys.stderr)
        return 1


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "merge":
        for name in merge(argv[1], argv[2]):
            print(name)
        return 0
    if len(argv) == 3 and argv[0] == "write":
        _write(argv[1], {"runtimes": runtimes(argv[2])} if argv[2] else {})
        return 0
    if len(argv) == 2 and argv[0] == "check":
        return 0 if engine_has(json.loads(sys.stdin.read() or "null"), argv[1]) else 1
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
