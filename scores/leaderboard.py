"""A leaderboard per benchmark: a harness's or an environment's succeeded runs, one row per
model (per harness and model on an environment's board), ranked by its latest or its best
score with the score's 95% interval.

Runs are ranked together only when they ran the same tasks the same way: the same environment
version (the harness's, for harnesses made from an environment), the same Tasks field as
launched (Run.tasks_md5, set at launch: a harness whose tasks were edited starts a new group),
the same grading and the same attempts per task. Each such set is a group; the board shows one group, by default
the one with the newest run, and names the others present.

Ranks follow the rule of Chatbot Arena's leaderboard: a row's rank is 1 + the number of rows
whose 95% interval lies wholly above its own (their low end above its high end), so rows that
the intervals cannot tell apart share a rank and are marked tied. A row without an interval
counts as its score alone (low = high = score). Rows are listed by score, highest first; the
first is the leader, and every other row links to its paired comparison with the leader.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import (
    CharField,
    Count,
    F,
    Func,
    Max,
    Min,
    PositiveIntegerField,
    QuerySet,
    Value,
)

from belvedir.errors import Invalid
from harnesses.models import Environment, Harness
from runs.models import Run, Status

LATEST, BEST = "latest", "best"
PICKS = (LATEST, BEST)
ROW_FIELDS = (
    "id",
    "harness_id",
    "harness_name",
    "model",
    "score",
    "score_stderr",
    "score_ci_low",
    "score_ci_high",
    "n_tasks",
    "score_interval_note",
    "finished_at",
)
TIE_RULE = (
    "rank = 1 + the rows whose 95% interval lies wholly above this row's; rows sharing a rank "
    "are tied (a row without an interval counts as its score alone)"
)


@dataclass(frozen=True)
class Group:
    """One set of runs that may be ranked together."""

    key: str
    environment_version: int | None
    grading: str
    attempts: int
    tasks_md5: str
    runs: int
    models: int
    first_at: datetime
    last_at: datetime
    task_sets: int = 1  # how many Tasks fields the groups of this version and grading have

    @property
    def label(self) -> str:
        version = f"v{self.environment_version}" if self.environment_version else "own tasks"
        tries = f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        label = f"{version} · {self.grading} × {tries}"
        if self.task_sets > 1:
            # the Tasks field tells them apart, the day its runs began says which is which
            label += f" · tasks {self.tasks_md5[:7]}, run from {self.first_at:%Y-%m-%d}"
        return label


@dataclass
class Row:
    rank: int
    tied: bool
    run: Run
    runs: int  # the row's runs in the group
    leader: Run | None  # None on the leader's own row

    @property
    def low(self) -> float:
        return self.run.score_ci_low if self.run.score_stderr is not None else self.run.score

    @property
    def high(self) -> float:
        return self.run.score_ci_high if self.run.score_stderr is not None else self.run.score


@dataclass
class Board:
    pick: str
    groups: list[Group]
    group: Group | None
    rows: list[Row] = field(default_factory=list)
    by_harness: bool = False  # an environment's board: a row per harness and model


def _group_key(version: int | None, grading: str, attempts: int, tasks_md5: str) -> str:
    digest = hashlib.sha256(f"{version}|{grading}|{attempts}|{tasks_md5}".encode()).hexdigest()
    return digest[:12]


def _scored(runs: QuerySet[Run]) -> QuerySet[Run]:
    return runs.filter(status=Status.SUCCEEDED, score__isnull=False).exclude(finished_at=None)


class First(Func):
    """The first element of an array: `(ARRAY_AGG(id ORDER BY …))[1]`, a group's first run."""

    template = "(%(expressions)s)[1]"
    output_field = CharField()


def _entries(runs: QuerySet[Run], version_of) -> list[dict]:
    """One row per group and entry (harness and model): its runs, first and last end, and
    the ids of its latest and its best run (one query, one pass over the runs)."""
    newest = ("-finished_at", "-id")
    return list(
        runs.annotate(version=version_of)
        .values("version", "grading", "attempts", "tasks_md5", "harness_id", "model")
        .annotate(
            n=Count("id"),
            first_at=Min("finished_at"),
            last_at=Max("finished_at"),
            latest=First(ArrayAgg("id", order_by=newest)),
            best=First(ArrayAgg("id", order_by=("-score", *newest))),
        )
        .order_by()
    )


def _groups(entries: list[dict]) -> dict[str, tuple[Group, list[dict]]]:
    """The groups present, newest run first, each with its entries."""
    found: dict[tuple, list[dict]] = {}
    for entry in entries:
        way = (entry["version"], entry["grading"], entry["attempts"], entry["tasks_md5"])
        found.setdefault(way, []).append(entry)
    sets: dict[tuple, int] = {}
    for way in found:
        sets[way[:3]] = sets.get(way[:3], 0) + 1
    groups = []
    for way, members in found.items():
        version, grading, attempts, tasks_md5 = way
        group = Group(
            key=_group_key(*way),
            environment_version=version,
            grading=grading,
            attempts=attempts,
            tasks_md5=tasks_md5,
            runs=sum(m["n"] for m in members),
            models=len({m["model"] for m in members}),
            first_at=min(m["first_at"] for m in members),
            last_at=max(m["last_at"] for m in members),
            task_sets=sets[way[:3]],
        )
        groups.append((group, members))
    groups.sort(key=lambda item: item[0].last_at, reverse=True)
    return {group.key: (group, members) for group, members in groups}


def _rank(runs: list[tuple[Run, int]]) -> list[Row]:
    ordered = sorted(runs, key=lambda item: (-item[0].score, -item[0].finished_at.timestamp()))
    rows = [Row(0, False, run, count, None) for run, count in ordered]
    for row in rows:
        row.rank = 1 + sum(other.low > row.high for other in rows)
    ranks = [row.rank for row in rows]
    leader = rows[0].run if rows else None
    for row in rows:
        row.tied = ranks.count(row.rank) > 1
        row.leader = leader if row.run is not leader else None
    return rows


def _board(runs: QuerySet[Run], version_of, *, pick: str, group: str, by_harness: bool):
    if pick not in PICKS:
        raise Invalid(f"Pick one of {', '.join(PICKS)}.", field="pick")
    groups = _groups(_entries(_scored(runs), version_of))
    key = group or next(iter(groups), "")
    if group and group not in groups:
        raise Invalid(f"This board has no group {group!r}.", field="group")
    chosen, members = groups.get(key, (None, []))
    board = Board(pick, [g for g, _ in groups.values()], chosen, by_harness=by_harness)
    counts = {m["latest" if pick == LATEST else "best"]: m["n"] for m in members}
    picked = Run.objects.filter(pk__in=counts).only(*ROW_FIELDS) if counts else []
    board.rows = _rank([(run, counts[run.pk]) for run in picked])
    return board


def harness_board(harness: Harness, *, pick: str = LATEST, group: str = "") -> Board:
    """The harness's board: a row per model (two queries: the groups and entries, the rows)."""
    version = Value(harness.environment_version, output_field=PositiveIntegerField())
    runs = Run.objects.filter(project_id=harness.project_id, harness=harness)
    return _board(runs, version, pick=pick, group=group, by_harness=False)


def environment_board(environment: Environment, *, pick: str = LATEST, group: str = "") -> Board:
    """The environment's board: the runs of the harnesses made from it, a row per harness and
    model, grouped by the version each harness took (two queries)."""
    runs = Run.objects.filter(project_id=environment.project_id, harness__environment=environment)
    return _board(runs, F("harness__environment_version"), pick=pick, group=group, by_harness=True)
