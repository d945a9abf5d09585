"""bench/harbor_managed.py's breakdown of a managed Harbor run from its probe events
(bench/_harbor_probe.py), and the check that the parts add up to the total.

A run's time, launch to seen finished, on its critical path (each part an interval between two
measured moments, in order):

    launch (POST /api/v1/runs) | queue pick-up | clone, workspace | run sandbox start |
    driver install (--check) | driver start (export fetched, harbor command) |
    Harbor's import under gVisor (to the first task sandbox's create) |
    tasks (first create to last stop answered, or the output's end if that is sooner) |
    Harbor's end (last stop to the output's end) |
    finish (collect, record) | run_finish, seen by the client

Per task (its task sandbox, from its create's request to its stop's answer): the create's
parts (slot, image key, build or cache hit, container start, the rest), each exec, upload and
download (the platform's time serving it), the stop, and between the calls what Harbor does
in the run sandbox plus the trip through the gateway. ADDS_UP: the parts, summed, are within
this share of the total; a missing or misplaced event breaks it.
"""

from __future__ import annotations

import re

ADDS_UP = 0.10
SANDBOX_PATH = re.compile(r"^/api/v1/task-sandboxes/(tsb_[A-Za-z0-9]+)(/exec|/files)?$")
CREATE_PATH = "/api/v1/task-sandboxes"


class Missing(ValueError):
    """An event the breakdown needs is not in the probe's file."""


def _one(events: list[dict], what: str, run: str | None = None) -> dict:
    """The first to start of the events `what` (of `run`); a warm task sandbox's start is not
    the run sandbox's."""
    found = [
        e
        for e in sorted(events, key=lambda e: e["t"])
        if e["what"] == what and (run is None or e.get("run") == run) and not e.get("task")
    ]
    if not found:
        raise Missing(f"no {what!r} event")
    return found[0]


def _within(event: dict, outer: dict) -> bool:
    return outer["t"] - 1e-3 <= event["t"] and event["end"] <= outer["end"] + 1e-3


def run_breakdown(events: list[dict], *, run: str, posted: float, answered: float, seen: float):
    """[(part, seconds)] of one run's critical path, the total (posted -> seen) and the
    per-task breakdown {task sandbox: [(part, seconds)], ...}."""
    claim = _one(events, "claim", run)
    after = [e for e in events if e["t"] >= claim["t"] - 1e-3]
    # The cluster's events of this run: its worker process, after its claim.
    worker = [e for e in after if e["pid"] == claim["pid"]]
    prepare = _one(worker, "prepare (clone, workspace tar)")
    start = _one(worker, "run sandbox start")
    command = _one(worker, "line: run command")
    harbor = _one(worker, "line: harbor run")
    follow = _one(worker, "follow")
    finished = _one(worker, "run finished", run)
    sandboxes = tasks_of(after, not_before=harbor["t"], not_after=follow["end"])
    if not sandboxes:
        raise Missing("no task sandbox was created")
    first = min(s["span"][0] for s in sandboxes.values())
    # Harbor's process exits once its last stops have reached the platform, not when they are
    # answered (drivers/harness-harbor/belvedir_harbor/stops.py): a stop answered after the
    # output's end is off the run's critical path.
    last = min(max(s["span"][1] for s in sandboxes.values()), follow["end"])
    moments = [
        ("launch (POST /api/v1/runs)", posted, answered),
        ("queue pick-up (to the worker's claim)", answered, claim["end"]),
        ("clone, workspace", prepare["t"], prepare["end"]),
        ("run sandbox start", start["t"], start["end"]),
        ("driver install (--check)", start["end"], command["t"]),
        ("driver start (export fetched, harbor command)", command["t"], harbor["t"]),
        ("Harbor's import under gVisor (to the first create)", harbor["t"], first),
        ("tasks (first create to last stop)", first, last),
        ("Harbor's end (to the output's end)", last, follow["end"]),
        ("finish (collect, record)", follow["end"], finished["t"]),
        # The client may read it finished before run_finish has returned: from its start.
        ("run_finish, seen by the client", finished["t"], seen),
    ]
    parts = [(name, end - begin) for name, begin, end in moments]
    tasks = {sid: (task["parts"], task["total"]) for sid, task in sandboxes.items()}
    return parts, seen - posted, tasks


def tasks_of(events: list[dict], *, not_before: float, not_after: float) -> dict[str, dict]:
    """Each task sandbox created in the window: its span and its parts."""
    creates = [e for e in events if e["what"] == "create" and not_before <= e["t"] <= not_after]
    requests = [e for e in events if e["what"] == "http" and not_before <= e["t"] <= not_after]
    posts = [r for r in requests if r["method"] == "POST" and r["path"] == CREATE_PATH]
    found: dict[str, dict] = {}
    taken: set[int] = set()
    for create in sorted(creates, key=lambda e: e["end"]):
        # Its request: a POST around it (served on the event loop's thread, the view in a
        # thread of its own), the first to end of those not already another's.
        around = [i for i, p in enumerate(posts) if i not in taken and _within(create, p)]
        if not around:
            raise Missing(f"no create request around task sandbox {create['sandbox']}")
        index = min(around, key=lambda i: (posts[i]["end"], -posts[i]["t"]))
        taken.add(index)
        request = posts[index]
        inside = [
            e
            for e in events
            if e["thread"] == create["thread"] and e["what"].startswith("create: ")
            and _within(e, create)
        ]  # fmt: skip
        parts: dict[str, float] = {}
        for e in inside:
            parts[e["what"]] = parts.get(e["what"], 0.0) + e["end"] - e["t"]
        build = next((e for e in inside if e["what"] == "create: build or cache hit"), None)
        if build is not None:
            label = "create: cache hit" if build["cached"] else "create: build"
            parts[label] = parts.pop("create: build or cache hit")
        parts["create: the rest (request, digest, rows)"] = (request["end"] - request["t"]) - sum(
            parts.values()
        )
        found[create["sandbox"]] = {"request": request, "parts": parts, "calls": []}
    for r in requests:
        match = SANDBOX_PATH.match(r["path"])
        if match and match.group(1) in found:
            found[match.group(1)]["calls"].append(r)
    for sid, task in found.items():
        calls = sorted(task["calls"], key=lambda r: r["t"])
        stops = [c for c in calls if c["method"] == "DELETE"]
        if not stops:
            raise Missing(f"task sandbox {sid} was never stopped")
        begin, end = task["request"]["t"], stops[-1]["end"]
        counts: dict[str, int] = {}
        for call in calls:
            kind = {"/exec": "exec", "/files": "upload" if call["method"] == "PUT" else "download"}
            name = kind.get(SANDBOX_PATH.match(call["path"]).group(2) or "", "stop")
            counts[name] = counts.get(name, 0) + 1
            task["parts"][name] = task["parts"].get(name, 0.0) + call["end"] - call["t"]
        for name, n in counts.items():
            task["parts"][f"{name} (x{n})"] = task["parts"].pop(name)
        # The client may send its next call as the last bytes of one leave the server, a
        # little before the server's own end of it: between the calls is what their union
        # leaves, and their overlap makes the parts sum past the total (by a few %).
        served = _union([(c["t"], c["end"]) for c in [task["request"], *calls]])
        task["parts"]["between calls (Harbor in the run sandbox, the gateway)"] = (
            end - begin
        ) - served
        task["span"] = (begin, end)
        task["total"] = end - begin
    return found


def _union(spans: list[tuple[float, float]]) -> float:
    """The time covered by these spans, counted once where they overlap."""
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(spans):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def adds_up(parts: list[tuple[str, float]], total: float) -> tuple[bool, float]:
    """Whether the parts sum to the total within ADDS_UP, and by how much they miss (a share).
    A part below zero is a misplaced event: it never adds up."""
    if total <= 0 or any(seconds < -1e-3 for _, seconds in parts):
        return False, float("inf")
    missing = abs(total - sum(seconds for _, seconds in parts)) / total
    return missing <= ADDS_UP, missing
