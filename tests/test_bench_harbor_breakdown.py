"""bench/harbor_managed.py's breakdown of a managed Harbor run adds up to its total (issue 28,
item 3): from the probe's events of a run (bench/_harbor_probe.py's lines, as its web server
and cluster write them), the parts of the run's critical path sum to launch -> seen within
10 %, each task's parts to its own span, and a lost event or time nobody measured fails the
check instead of hiding in a part."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
try:
    from _harbor_report import ADDS_UP, Missing, adds_up, run_breakdown
finally:
    sys.path.remove(str(BENCH))

WEB, WORKER, LOOP = 10, 20, 1
RUN = "run_bench"


def event(what, t, end=None, pid=WEB, thread=LOOP, **fields):
    return {"what": what, "t": t, "end": t if end is None else end, "pid": pid,
            "thread": thread, **fields}  # fmt: skip


def task(n: int, start: float) -> list[dict]:
    """One task sandbox's calls as the web server logs them: its create (the request on the
    loop's thread, the service and its parts in a view thread), 2 execs, an upload, a
    download and the stop; Harbor's time between them."""
    sid, thread = f"tsb_{n}", 100 + n
    path = f"/api/v1/task-sandboxes/{sid}"
    return [
        event("http", start, start + 1.5, method="POST", path="/api/v1/task-sandboxes"),
        event("create", start + 0.1, start + 1.4, thread=thread, sandbox=sid, container=f"c{n}"),
        event("create: reserve a slot", start + 0.1, start + 0.15, thread=thread),
        event("create: image key", start + 0.15, start + 0.2, thread=thread),
        event(
            "create: build or cache hit", start + 0.2, start + 0.25, thread=thread, cached=True
        ),  # fmt: skip
        event("create: container start", start + 0.25, start + 1.3, thread=thread),
        event("http", start + 1.6, start + 2.0, method="POST", path=f"{path}/exec"),
        event("http", start + 2.1, start + 2.4, method="PUT", path=f"{path}/files"),
        event("http", start + 2.5, start + 3.5, method="POST", path=f"{path}/exec"),
        event("http", start + 3.6, start + 4.0, method="GET", path=f"{path}/files"),
        event("http", start + 4.1, start + 4.5, method="DELETE", path=path),
        event("stop", start + 4.15, start + 4.45, thread=thread, sandbox=sid),
    ]


def run_events(gap_before_prepare: float = 0.05, output_end: float = 6.0) -> list[dict]:
    w = {"pid": WORKER, "thread": 7}
    prepare = 1.05 + gap_before_prepare
    events = [
        event("http", 0.0, 0.8, method="POST", path="/api/v1/runs"),
        event("claim", 0.9, 1.0, run=RUN, **w),
        event("prepare (clone, workspace tar)", prepare, prepare + 0.3, **w),
        event("run sandbox start", prepare + 0.3, prepare + 2.3, **w),
        event("line: run command", prepare + 2.9, **w),
        event("line: harbor run", prepare + 3.2, **w),
    ]
    first = prepare + 9.0
    for n in range(4):
        events += task(n, first + 0.05 * n)
    events += [
        event("follow", prepare + 2.3, first + output_end, **w),
        event("run finished", first + output_end, first + output_end + 0.1, run=RUN, **w),
    ]
    return events


def breakdown(events):
    finished = next(e for e in events if e["what"] == "run finished")
    return run_breakdown(events, run=RUN, posted=0.0, answered=0.8, seen=finished["end"] + 0.1)


def test_the_runs_parts_and_each_tasks_add_up_to_their_totals():
    parts, total, tasks = breakdown(run_events())

    ok, missing = adds_up(parts, total)
    assert ok and missing < 0.01, (parts, total)
    names = dict(parts)
    assert names["queue pick-up (to the worker's claim)"] == pytest.approx(0.2)
    assert names["run sandbox start"] == pytest.approx(2.0)
    assert names["driver install (--check)"] == pytest.approx(0.6)
    assert names["Harbor's import under gVisor (to the first create)"] == pytest.approx(5.8)
    assert names["tasks (first create to last stop)"] == pytest.approx(4.65)
    assert set(tasks) == {"tsb_0", "tsb_1", "tsb_2", "tsb_3"}
    task_parts, task_total = tasks["tsb_2"]
    assert task_total == pytest.approx(4.5)
    assert sum(task_parts.values()) == pytest.approx(task_total)
    assert task_parts["create: container start"] == pytest.approx(1.05)
    assert task_parts["create: cache hit"] == pytest.approx(0.05)
    assert task_parts["exec (x2)"] == pytest.approx(1.4)
    assert task_parts["upload (x1)"] == pytest.approx(0.3)
    assert task_parts["download (x1)"] == pytest.approx(0.4)
    assert task_parts["stop (x1)"] == pytest.approx(0.4)
    assert task_parts["between calls (Harbor in the run sandbox, the gateway)"] == pytest.approx(
        0.5
    )


def test_a_stop_answered_after_harbors_output_ended_is_off_the_critical_path():
    # The last stop (tsb_3's) is answered at first + 4.65; Harbor's process, which waits only
    # for its stops to reach the platform, has ended its output at first + 4.6.
    parts, total, _ = breakdown(run_events(output_end=4.6))

    ok, missing = adds_up(parts, total)
    assert ok and missing < 0.01, (parts, total)
    names = dict(parts)
    assert names["tasks (first create to last stop)"] == pytest.approx(4.6)
    assert names["Harbor's end (to the output's end)"] == pytest.approx(0.0)


def test_time_no_part_measured_fails_the_check():
    # 3 s between the claim and the clone that no probe saw: more than 10 % of the run.
    parts, total, _ = breakdown(run_events(gap_before_prepare=3.0))

    ok, missing = adds_up(parts, total)
    assert not ok and missing > ADDS_UP


def test_a_lost_event_is_said_not_hidden():
    events = [e for e in run_events() if e["what"] != "line: harbor run"]
    with pytest.raises(Missing, match="harbor run"):
        breakdown(events)
    unstopped = [e for e in run_events() if not (e["what"] == "http" and e["method"] == "DELETE"
                                                 and e["path"].endswith("tsb_1"))]  # fmt: skip
    with pytest.raises(Missing, match="tsb_1 was never stopped"):
        breakdown(unstopped)


def test_a_part_below_zero_never_adds_up():
    parts = [("a", 5.0), ("b", -0.5), ("c", 5.5)]
    assert adds_up(parts, 10.0) == (False, float("inf"))


def test_calls_in_flight_together_count_once_between_and_show_as_overlap():
    events = run_events()
    # tsb_0's download sent at start + 2.4, while its exec (2.5-3.5) runs: 1 s in flight
    # together.
    download = next(
        e for e in events if e["what"] == "http" and e["method"] == "GET" and "tsb_0" in e["path"]
    )
    download["t"] -= 1.2
    parts, total, tasks = breakdown(events)

    task_parts, task_total = tasks["tsb_0"]
    # Between the calls: what their union leaves (0.5 s less the two 0.1 s gaps it covers now).
    between = task_parts["between calls (Harbor in the run sandbox, the gateway)"]
    assert between == pytest.approx(0.3)
    ok, missing = adds_up(list(task_parts.items()), task_total)
    assert not ok and missing == pytest.approx(1.0 / 4.5)  # the overlap, over 10 %: it fails
    assert adds_up(parts, total)[0]  # the run's own parts are untouched
