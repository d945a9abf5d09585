"""The sandbox's first process: fetch the Tasks file, run the install command, then the run command.

Copied into every sandbox as /workspace/.belvedir/entrypoint.py and started as
`/usr/bin/python3 -I -S` (no PYTHON* variables, no site packages: the harness's env cannot
reach into it). Standard library only; it runs as the sandbox user, like the harness.

The platform must tell its own failures (the Tasks file could not be downloaded, the install
command failed) from the harness's, and the harness runs as the same user and could write
any file this process writes. So such a failure is recorded in the stage file as
`<stage> <HMAC of the stage>` under a per-run key that this process reads and deletes before
any harness code starts, and keeps only in its own memory, made undumpable so that a process
of the same user cannot read it through /proc. The harness can erase a marker but never forge
one. The same marker says when results.json is a FIFO, a socket or a device
(`results-fifo`, …): some kernels (gVisor's) keep those out of sight of the engine.

Exit code: the install command's when it failed, 97 when the Tasks file could not be
downloaded, 96 when the repo is missing, else the run command's (128 + N after signal N).
Just before exiting it is recorded in the exit file as `exit-<code> <HMAC>`, so the worker
can finish the run as soon as the output ends, without waiting for the engine to report the
container's exit (100-200 ms of tearing the sandbox down).

The platform leaves install.sh out when the harness has no install command (or `true`):
nothing is started for it (under gVisor every process costs tens of milliseconds), and when
the run starts from the install cache's snapshot (`sandboxes.installcache`). When the
platform wants a snapshot (the snapshot file, read and deleted before anything else runs), a
successful install is followed by the signed `installed` marker in the installed file; this
process then waits (up to SNAPSHOT_WAIT_SECONDS) for the resume file, which the worker writes
once it has copied the sandbox's volume, and runs the run command.
"""

import ctypes
import os
import stat
import sys
import time

try:  # the SHA-256 built into the interpreter: hashlib and hmac load OpenSSL (~10-50 ms
    from _sha2 import sha256  # under gVisor); 3.12 on, the sandbox's python3
except ImportError:  # older interpreters (the platform's own, for runs.contract)
    from hashlib import sha256

WORKSPACE = "/workspace"
CONTROL_DIR = f"{WORKSPACE}/.belvedir"
REPO_DIR = f"{WORKSPACE}/repo"
ENTRYPOINT_FILE = f"{CONTROL_DIR}/entrypoint.py"  # where this file is put in the sandbox
# The sandbox's command: this file, isolated from the harness's env (-I) and site (-S).
COMMAND = ("/usr/bin/python3", "-I", "-S", ENTRYPOINT_FILE)
STAGE_FILE = f"{CONTROL_DIR}/stage"
STAGE_KEY_FILE = f"{CONTROL_DIR}/stage_key"
EXIT_FILE = f"{CONTROL_DIR}/exit"
RESULTS_FILE = f"{REPO_DIR}/results.json"
SNAPSHOT_FILE = f"{CONTROL_DIR}/snapshot"  # the platform wants an install snapshot
INSTALLED_FILE = f"{CONTROL_DIR}/installed"  # the install succeeded: take it (signed)
RESUME_FILE = f"{CONTROL_DIR}/resume"  # taken (or given up): go on
SNAPSHOT_WAIT_SECONDS = 300
PR_SET_DUMPABLE = 4
SIGPIPE, SIGXFSZ = 13, 25  # Linux's numbers (the signal module is not imported for them)
RUN_STAGE_LINE = "belvedir: starting the run command"


def stage_marker(key: str, stage: str) -> str:
    """What the stage file holds after `stage` failed (runs.contract.stage_marker agrees)."""
    return f"{stage} {hmac_sha256(key.encode(), f'belvedir-stage:{stage}'.encode())}"


def hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) in hex, as hmac.new(key, message, "sha256").hexdigest()."""
    if len(key) > 64:  # SHA-256's block size
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest()


def take_key() -> str:
    """The per-run stage key, deleted from disk before any harness code runs."""
    try:
        with open(STAGE_KEY_FILE, encoding="utf-8") as f:
            key = f.read().strip()
        os.unlink(STAGE_KEY_FILE)
    except OSError:
        return ""
    return key


def make_undumpable() -> None:
    """Nobody but root may read this process's memory; children (after exec) are normal."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def mark(key: str, stage: str) -> None:
    if not key:
        return
    try:
        with open(STAGE_FILE, "w", encoding="utf-8") as f:
            f.write(stage_marker(key, stage))
    except OSError as exc:
        print(f"belvedir: could not record the {stage} stage: {exc}", flush=True)


def fetch_tasks(path: str) -> bool:
    """Download the run's Tasks file from the platform with the per-run key."""
    import urllib.request  # only here: importing it costs ~0.1 s under gVisor

    env = os.environ
    url = f"{env['BELVEDIR_BASE_URL'].rstrip('/')}/api/v1/runs/{env['BELVEDIR_RUN_ID']}/tasks"
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {env['BELVEDIR_API_KEY']}"}
    )
    error: Exception | None = None
    for attempt in range(3):
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                data = response.read()
            with open(path, "wb") as f:
                f.write(data)
            return True
        except Exception as exc:  # any failure is retried, then reported
            error = exc
            time.sleep(0.5 * (attempt + 1))
    print(f"belvedir: the Tasks file could not be downloaded from {url}: {error}", flush=True)
    return False


def run_script(name: str) -> int:
    """Run one of the harness's commands; its exit code the way a shell reports it.

    posix_spawn, not subprocess (importing it costs ~20 ms under gVisor): the child gets the
    signals Python ignores (SIGPIPE, SIGXFSZ) back at their defaults, as subprocess restores
    them, and no descriptor of this process (Python opens its files close-on-exec)."""
    argv = ["bash", f"{CONTROL_DIR}/{name}"]
    pid = os.posix_spawnp("bash", argv, os.environ, setsigdef=(SIGPIPE, SIGXFSZ))
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return 128 - code if code < 0 else code


def take_flag(path: str) -> bool:
    """Whether the platform left the file `path`; deleted (before any harness code runs)."""
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def wait_for_snapshot(key: str) -> None:
    """Say the install is done (signed), then wait for the worker to have copied it."""
    partial = f"{INSTALLED_FILE}.{os.getpid()}"
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(stage_marker(key, "installed"))
        os.replace(partial, INSTALLED_FILE)
    except OSError:
        return
    deadline = time.monotonic() + SNAPSHOT_WAIT_SECONDS
    while not os.path.exists(RESUME_FILE) and time.monotonic() < deadline:
        time.sleep(0.02)
    for path in (RESUME_FILE, INSTALLED_FILE):
        try:
            os.unlink(path)
        except OSError:
            pass


def main() -> int:
    key = take_key()
    snapshot = take_flag(SNAPSHOT_FILE) and bool(key)
    make_undumpable()
    code = stages(key, snapshot=snapshot)
    mark_exit(key, code)
    return code


def mark_exit(key: str, code: int) -> None:
    """The signed exit code, written last (in a file of its own: the stage file keeps its
    marker). Written to a new file renamed into place, so it is never seen half-written."""
    if not key:
        return
    partial = f"{EXIT_FILE}.{os.getpid()}"
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(stage_marker(key, f"exit-{code}"))
        os.replace(partial, EXIT_FILE)
    except OSError:
        pass  # the worker waits for the engine to report the exit instead


def stages(key: str, *, snapshot: bool = False) -> int:
    """The Tasks file, the install command (then its snapshot, if wanted), the run command;
    the exit code."""
    tasks_file = os.environ.get("BELVEDIR_TASKS_FILE", "")
    if tasks_file and not fetch_tasks(tasks_file):
        mark(key, "tasks")
        return 97
    try:
        os.chdir(REPO_DIR)
    except OSError as exc:
        print(f"belvedir: the repo is missing from the sandbox: {exc}", flush=True)
        return 96
    code = run_script("install.sh") if os.path.exists(f"{CONTROL_DIR}/install.sh") else 0
    if code != 0:
        mark(key, "install")
        return code
    if snapshot:
        wait_for_snapshot(key)
    print(RUN_STAGE_LINE, flush=True)
    code = run_script("run.sh")
    special = special_kind(RESULTS_FILE)
    if special:
        mark(key, f"results-{special}")
    return code


def special_kind(path: str) -> str:
    """ "fifo", "socket" or "device" when `path` is one (a kernel like gVisor's may keep those
    to itself, out of sight of the engine that reads results.json back); else ""."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return ""


if __name__ == "__main__":
    sys.exit(main())
