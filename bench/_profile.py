"""py-spy on a benchmark's server process, and where its time went (bench/ingest.py and
bench/router.py --profile)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from _common import table

VENV_BIN = Path(sys.executable).parent


def py_spy(pid: int, seconds: int, out: Path) -> subprocess.Popen | None:
    exe = shutil.which("py-spy") or str(VENV_BIN / "py-spy")
    if not Path(exe).exists():
        print("(py-spy is not installed: pip install py-spy to profile)", file=sys.stderr)
        return None
    return subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--duration", str(seconds), "--format", "raw",
         "--rate", "200", "--gil", "--output", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def print_profile(raw: Path, top: int = 25) -> None:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    if not raw.exists():
        print("(no profile written)")
        return
    total = 0
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        # Idle worker threads wait in the gthread poller / queue: skip those stacks.
        if any(
            f.startswith(("wait (threading", "select (selectors", "_worker (concurrent"))
            for f in frames[-2:]
        ):
            continue
        total += n
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
    if not total:
        print("(empty profile)")
        return
    print(f"\npy-spy, web worker during the timed phase ({total} busy samples):")
    rows = [
        [f[:90], f"{100 * n / total:5.1f}%"]
        for f, n in sorted(own.items(), key=lambda x: -x[1])[:top]
    ]
    print(table(rows, ["function (self time)", "share"]))
    interesting = ("spans_ingest", "_sessions_for", "_resolve_session_ids", "_store", "_json ",
                   "decode_request", "parse_llm_call", "api_key_authenticate", "execute (psycopg",
                   "encode_response", "handle_request (gunicorn", "get_response (django",
                   "_read_body", "traces (traces/ingest_views.py")  # fmt: skip
    rows = []
    for frame, n in sorted(inclusive.items(), key=lambda x: -x[1]):
        if any(word in frame for word in interesting):
            rows.append([frame[:90], f"{100 * n / total:5.1f}%"])
    print(table(rows[:top], ["function (inclusive)", "share"]))
