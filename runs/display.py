"""How a run reads on its page: the log tail, the stages with their times, the results as a
table, the harness configuration it ran with. Pure reads of one run; the views render them."""

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils.safestring import SafeString

from belvedir import ansi
from harnesses import env_secrets
from harnesses.services import FIELDS as HARNESS_FIELDS
from runs import contract
from runs.models import STAGES, Run, Stage, Status
from runs.results import TASK_KEYS  # where results.json holds per-task detail, in that order

MAX_TASK_COLUMNS = 8
MAX_TASK_ROWS = 500
TASKS_SHOWN_CHARS = 2000  # of the harness's Tasks field, in the configuration shown
TRUNCATED_NOTE = (
    f"… earlier output truncated, showing the last {contract.LOG_TAIL_BYTES // 1024} KB"
)


# --- the log ------------------------------------------------------------------------------


@dataclass
class LogView:
    text: str  # as the run wrote it, terminal escape codes included
    truncated: bool  # earlier output was dropped: the text starts mid-stream
    note: str = ""

    @property
    def html(self) -> SafeString:
        """For the page: escaped, terminal colours as classes, other escape codes gone."""
        return ansi.as_html(self.text)

    @property
    def download(self) -> str:
        """For the download: plain text, no escape codes, the note first when truncated."""
        plain = ansi.plain_text(self.text)
        return f"{self.note}\n{plain}" if self.truncated else plain


def log_view(run: Run) -> LogView:
    """The stored tail; when it starts mid-stream, from its first whole line, with a note."""
    text = run.log_tail
    if run.log_size <= len(text):
        return LogView(text, False)
    newline = text.find("\n")
    if 0 <= newline < len(text) - 1:
        text = text[newline + 1 :]
    return LogView(text, True, TRUNCATED_NOTE)


# --- the stages ---------------------------------------------------------------------------


@dataclass
class Step:
    stage: str
    label: str
    state: str  # "done", "current", "stopped" (where a run that ended stopped), "todo"
    elapsed: timedelta | None = None  # for the current step: how long so far


def stages(run: Run, *, now: datetime) -> list[Step]:
    """The four steps, each done, current (with its time so far), stopped or still to come."""
    reached = STAGES.index(run.stage) if run.stage in STAGES else -1
    steps = []
    for index, stage in enumerate(STAGES):
        if index < reached or (index == reached and run.status == Status.SUCCEEDED):
            state = "done"
        elif index == reached:
            state = "current" if run.status == Status.RUNNING else "stopped"
        else:
            state = "todo"
        elapsed = None
        if state == "current" and run.stage_started_at:
            elapsed = max(now - run.stage_started_at, timedelta(0))
        steps.append(Step(stage, Stage(stage).label, state, elapsed))
    return steps


def elapsed(run: Run, *, now: datetime) -> timedelta | None:
    """How long the run has been going (or went): from its start to its end, or to now."""
    if run.started_at is None:
        return None
    return max((run.finished_at or now) - run.started_at, timedelta(0))


# --- notes --------------------------------------------------------------------------------


def failure_notes(run: Run) -> list[str]:
    """What the platform said about a failed run (its `belvedir:` notes), for the banner."""
    if run.status != Status.FAILED:
        return []
    notes = [n for n in run.notes if str(n).startswith("belvedir:")]
    if not notes and run.exit_code is not None:
        notes = [f"The run ended with exit code {run.exit_code}."]
    return [str(n) for n in notes]


def other_notes(run: Run) -> list[str]:
    """The notes the banner does not show."""
    if run.status == Status.FAILED:
        return [str(n) for n in run.notes if not str(n).startswith("belvedir:")]
    return [str(n) for n in run.notes]


# --- results ------------------------------------------------------------------------------


def cell(value) -> str:
    """One value as table text: numbers short, nested values as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, int | str):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# A per-task value that is itself a list of objects (the Belvedir Runner's "attempts"): shown
# as a small table in its cell, each of its values clipped.
NESTED_MAX_ROWS = 20
NESTED_CELL_CHARS = 300


@dataclass
class NestedTable:
    columns: list[str]
    rows: list[list[str]]
    total: int


def _clipped(text: str) -> str:
    return text if len(text) <= NESTED_CELL_CHARS else f"{text[: NESTED_CELL_CHARS - 1]}…"


def task_cell(value) -> str | NestedTable:
    """A per-task value as table text, or a list of objects as a small table of its own."""
    if value == []:
        return "—"
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        items = value[:NESTED_MAX_ROWS]
        columns = _columns(items, [])
        rows = [[_clipped(cell(item.get(c))) for c in columns] for item in items]
        return NestedTable(columns, rows, len(value))
    return cell(value)


@dataclass
class TaskTable:
    key: str  # the results.json key it came from
    columns: list[str]
    rows: list[list[str | NestedTable]]
    total: int  # rows in results.json (only the first MAX_TASK_ROWS are shown)


@dataclass
class ResultsView:
    score: float | None  # the run's score: what it counts for (None unless it succeeded)
    reported_score: str = ""  # the harness's own "score", when it reads differently
    reported_note: str = ""
    tasks: TaskTable | None = None
    other: list[tuple[str, str]] = field(default_factory=list)
    raw: str = ""


# Keys shown first when present, in this order: PostgreSQL's jsonb keeps no key order.
FIRST_COLUMNS = ("id", "name", "attempt", "kind", "score", "passed", "reward")


def _columns(dicts: list[dict], first: list[str]) -> list[str]:
    columns = list(first)
    columns += [key for key in FIRST_COLUMNS if any(key in row for row in dicts)]
    for row in dicts:
        for key in row:
            if key not in columns:
                columns.append(str(key))
    return columns[:MAX_TASK_COLUMNS]


def task_table(key: str, value) -> TaskTable | None:
    """Per-task detail as rows: a list of objects or values, or an object keyed by task."""
    if isinstance(value, list) and value:
        items = value[:MAX_TASK_ROWS]
        if all(isinstance(item, dict) for item in items):
            columns = _columns(items, [])
            rows = [[task_cell(item.get(c)) for c in columns] for item in items]
        else:
            columns = ["#", "result"]
            rows = [[str(n), cell(item)] for n, item in enumerate(items, start=1)]
        return TaskTable(key, columns, rows, len(value))
    if isinstance(value, dict) and value:
        items = list(value.items())[:MAX_TASK_ROWS]
        nested = [v for _, v in items if isinstance(v, dict)]
        if len(nested) == len(items):
            columns = _columns(nested, ["task"])
            rows = [[str(name)] + [task_cell(v.get(c)) for c in columns[1:]] for name, v in items]
        else:
            columns = ["task", "result"]
            rows = [[str(name), cell(v)] for name, v in items]
        return TaskTable(key, columns, rows, len(value))
    return None


def results_view(run: Run) -> ResultsView | None:
    """The run's results.json as a score, a per-task table and the other keys; None if none."""
    results = run.results
    if not isinstance(results, dict):
        return None
    score = run.score if run.status == Status.SUCCEEDED else None
    view = ResultsView(score=score, raw=json.dumps(results, indent=2, ensure_ascii=False))
    if "score" in results:
        reported = results["score"]
        if run.status != Status.SUCCEEDED:
            view.reported_score = cell(reported)
            view.reported_note = (
                f"reported by the harness; not counted because the run {run.status}"
            )
        elif score is not None and reported != score:
            view.reported_score = cell(reported)
            view.reported_note = "as the harness wrote it"
    shown = {"score"}
    for key in TASK_KEYS:
        if key in results:
            view.tasks = task_table(key, results[key])
            if view.tasks is not None:
                shown.add(key)
                break
    view.other = [(str(k), cell(v)) for k, v in results.items() if k not in shown]
    return view


# --- the harness configuration --------------------------------------------------------------


def harness_config(run: Run) -> list[tuple[str, str]]:
    """The harness settings the run was launched with, secret env values masked."""
    snapshot = run.harness_snapshot or {}
    rows = []
    for name in HARNESS_FIELDS:
        if name == "env":
            env = env_secrets.env_masked(
                snapshot.get("env") or {}, run.harness_env_secrets_encrypted
            )
            value = "\n".join(f"{k}={v}" for k, v in env.items())
        else:
            value = snapshot.get(name)
        if name == "tasks" and value and len(value) > TASKS_SHOWN_CHARS:
            value = f"{value[:TASKS_SHOWN_CHARS]}\n… ({len(value.encode()):,} bytes in all)"
        if value not in (None, ""):
            rows.append((name, str(value)))
    return rows


def harness_changed_since(run: Run) -> bool:
    """The run's harness was edited after the run was launched (Run again uses it as it is now)."""
    harness = run.harness
    if harness is None:
        return False
    snapshot = run.harness_snapshot or {}
    if any(snapshot.get(f) != getattr(harness, f) for f in HARNESS_FIELDS if f in snapshot):
        return True
    return env_secrets.secrets_decrypt(
        run.harness_env_secrets_encrypted
    ) != env_secrets.secrets_decrypt(harness.env_secrets_encrypted)
