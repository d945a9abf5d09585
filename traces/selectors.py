"""Trace reads. Lists take the project (views pass `access.project`)."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import BigIntegerField, Count, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.urls import reverse
from django.utils import timezone

from belvedir.errors import DomainError, Invalid
from belvedir.models import Project
from runs.models import Run
from traces.models import Session, Span, Task, TaskGroup


def _parse_time(value: str, field: str) -> datetime:
    """An ISO 8601 time in UTC; naive times are read in the site's time zone."""
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = timezone.make_aware(parsed)
        # An offset that moves the time past year 1 or 9999 overflows here, not in the query.
        return parsed.astimezone(UTC)
    except ValueError:
        raise Invalid(f"{field} must be an ISO 8601 date or time.", field=field) from None
    except OverflowError:
        raise Invalid(
            f"{field} is out of range: with its offset it falls before year 1 or after 9999.",
            field=field,
        ) from None


def sessions_for(
    *,
    project: Project,
    run: str | None = None,
    outcome: str | None = None,
    model: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> QuerySet[Session]:
    # Not select_related("run"): the list and the API show only run_id, and the join made
    # PostgreSQL hash the whole runs table for a deep page (38 ms at 100k runs, page 100).
    sessions = Session.objects.filter(project=project)
    if run:
        sessions = sessions.filter(run_id=run)
    if outcome:
        if outcome not in ("success", "fail", "none"):
            raise DomainError('outcome must be "success", "fail" or "none".', field="outcome")
        sessions = sessions.filter(outcome="" if outcome == "none" else outcome)
    if model:
        sessions = sessions.filter(model=model)
    if since:
        sessions = sessions.filter(last_received_at__gte=_parse_time(since, "since"))
    if until:
        sessions = sessions.filter(started_at__lte=_parse_time(until, "until"))
    return sessions


SPAN_PAGE = 200
# What the session page's tree shows of a span; the rest (messages, attributes, events) is
# loaded when the span is opened (`span_detail`).
TREE_FIELDS = (
    "id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "span_kind",
    "start_time",
    "end_time",
    "duration_ms",
    "status_code",
    "status_message",
    "is_llm",
    "model",
    "input_tokens",
    "output_tokens",
    "duplicate_of",
)


@dataclass(frozen=True)
class SpanCursor:
    """Where a page of a session's spans starts: after the span (start_time, id) in start order.

    In a URL: `<start time in microseconds since the epoch>-<span id>`."""

    start_time: datetime
    span_pk: int

    def __str__(self) -> str:
        delta = self.start_time - EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return f"{micros}-{self.span_pk}"

    @classmethod
    def parse(cls, raw: str | None) -> "SpanCursor | None":
        """The cursor in `raw`, or None (the first page) when it is missing or not a cursor."""
        micros, _, pk = (raw or "").partition("-")
        if not (micros.isdigit() and pk.isdigit()) or len(micros) > 18 or len(pk) > 18:
            return None
        try:
            return cls(EPOCH + timedelta(microseconds=int(micros)), int(pk))
        except OverflowError:
            return None

    @classmethod
    def of(cls, span: Span) -> "SpanCursor":
        return cls(span.start_time, span.pk)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class SpanPage:
    """A page of a session's spans as the session page shows them (`span_rows`)."""

    rows: list[dict]
    timeline_ms: float
    next: SpanCursor | None  # None: the last page


def session_span_page(
    session: Session, after: SpanCursor | None = None, limit: int | None = None
) -> SpanPage:
    """`limit` (SPAN_PAGE) spans of the session in start order after the cursor (keyset: the
    (session, start_time) index, however deep the page), as a tree (`session_tree`) with
    waterfall bars on the whole session's timeline. One query; a second on later pages names
    the parents that earlier pages showed."""
    limit = limit or SPAN_PAGE
    spans = Span.objects.filter(session=session).only(*TREE_FIELDS).order_by("start_time", "id")
    if after is not None:
        # `>=` first, so the index condition starts the scan at the cursor; ties by id.
        spans = spans.filter(start_time__gte=after.start_time).filter(
            Q(start_time__gt=after.start_time) | Q(id__gt=after.span_pk)
        )
    spans = list(spans[: limit + 1])
    more = len(spans) > limit
    spans = spans[:limit]
    tree = session_tree(spans)
    parents = {}
    if after is not None:
        parents = _earlier_parents(session, [span for depth, span in tree if depth == 0])
    # The timeline spans the whole session (ingest keeps its first start and last end), so
    # the bars of every page share one scale; the page's own spans widen it if they must.
    starts = [span.start_time for span in spans] + [session.started_at]
    ends = [span.end_time for span in spans] + [session.ended_at]
    timeline = (
        min((t for t in starts if t is not None), default=None),
        max((t for t in ends if t is not None), default=None),
    )
    rows, timeline_ms = span_rows(tree, timeline)
    for row in rows:
        row["under"] = parents.get(row["span"].pk, "")
    return SpanPage(
        rows=rows, timeline_ms=timeline_ms, next=SpanCursor.of(spans[-1]) if more else None
    )


def _earlier_parents(session: Session, roots: list[Span]) -> dict[int, str]:
    """Span pk -> its parent's name, for the page's top-level spans whose parent is in the
    session (on an earlier page)."""
    wanted = {(s.trace_id, s.parent_span_id) for s in roots if s.parent_span_id}
    if not wanted:
        return {}
    match = Q()
    for trace_id, span_id in wanted:
        match |= Q(trace_id=trace_id, span_id=span_id)
    names = {
        (trace_id, span_id): name
        for trace_id, span_id, name in Span.objects.filter(
            match, project_id=session.project_id, session=session
        ).values_list("trace_id", "span_id", "name")
    }
    return {
        s.pk: names[(s.trace_id, s.parent_span_id)]
        for s in roots
        if (s.trace_id, s.parent_span_id) in names
    }


def session_tree(spans: list[Span]) -> list[tuple[int, Span]]:
    """The spans (in start order) depth-first, each with its depth, children by start time;
    a span whose parent is not among them is a root."""
    ids = {(s.trace_id, s.span_id) for s in spans}
    children: dict = {}
    roots = []
    for span in spans:
        parent = (span.trace_id, span.parent_span_id)
        if span.parent_span_id and parent in ids:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    out: list[tuple[int, Span]] = []
    stack = [(0, r) for r in reversed(roots)]
    while stack:
        depth, span = stack.pop()
        out.append((depth, span))
        stack.extend(
            (depth + 1, c) for c in reversed(children.get((span.trace_id, span.span_id), []))
        )
    return out


def span_rows(
    tree: list[tuple[int, Span]], timeline: tuple[datetime | None, datetime | None]
) -> tuple[list[dict], float]:
    """The tree as the session page nests it, each span with its waterfall bar, and the
    timeline's length in milliseconds.

    `children`: the span's subtree follows inside it; `closes`: how many enclosing spans end
    after it. `offset` and `width`: the bar's start and length, in percent of the timeline
    (first start, last end).
    """
    if not tree:
        return [], 0.0
    start, end = timeline
    total = max((end - start).total_seconds(), 1e-6)
    rows = []
    for index, (depth, span) in enumerate(tree):
        next_depth = tree[index + 1][0] if index + 1 < len(tree) else 0
        has_children = next_depth > depth
        offset = (span.start_time - start).total_seconds() / total * 100
        width = max((span.end_time - span.start_time).total_seconds() / total * 100, 0.4)
        rows.append(
            {
                "depth": depth,
                "span": span,
                "children": has_children,
                "closes": range(0 if has_children else depth - next_depth),
                "offset": round(min(offset, 99.6), 2),
                "width": round(min(width, 100 - min(offset, 99.6)), 2),
            }
        )
    return rows, total * 1000


def task_groups_for(*, project: Project) -> QuerySet[TaskGroup]:
    return TaskGroup.objects.filter(project=project)


def tasks_for(
    *, project: Project, group: str | None = None, session: str | None = None
) -> QuerySet[Task]:
    tasks = (
        Task.objects.filter(project=project)
        .select_related("session", "group")
        .order_by("-started_at")
    )
    if group:
        tasks = tasks.filter(group_id=group)
    if session:
        tasks = tasks.filter(session_id=session)
    return tasks


def run_trace_summary(run: Run) -> dict | None:
    """LLM calls and tokens a run's sessions recorded, with a link to its session."""
    sessions = Session.objects.filter(run=run)
    if not sessions.exists():
        return None
    totals = sessions.aggregate(
        calls=Sum("llm_call_count"), tin=Sum("input_tokens"), tout=Sum("output_tokens")
    )
    first = sessions.order_by("first_seen_at").first()
    provider = provider_billed(Span.objects.filter(session__in=sessions), run=run)
    url = (
        reverse("traces:session", kwargs={"session_id": first.pk})
        if sessions.count() == 1
        else reverse("traces:sessions") + f"?run={run.pk}"
    )
    return {
        "llm_calls": totals["calls"] or 0,
        "tokens": (totals["tin"] or 0) + (totals["tout"] or 0),
        "sessions": sessions.count(),
        "session_id": first.pk,
        "url": url,
        "provider": provider,
    }


# The router's span of an own-key call (router.services: billed to the user's provider).
BILLED_TO_PROVIDER = {"belvedir.router.billed_to": "provider"}


def provider_billed(spans: QuerySet[Span], *, run: Run) -> dict | None:
    """What the router's own-key calls among `spans` (of `run`'s sessions) used, which the
    user's provider bills (not the organization): calls, tokens and the cost the catalog's
    prices estimate (of the calls whose model it prices: `estimated` of `calls`); None when
    there are none. A run launched without an own key through the router (neither
    `model_proxied` nor `judge_proxied`) makes no such call (router.targets.own_prefix): None
    without a query."""
    if not (run.model_proxied or run.judge_proxied):
        return None
    totals = spans.filter(from_router=True, attributes__contains=BILLED_TO_PROVIDER).aggregate(
        calls=Count("pk"),
        tin=Sum("input_tokens"),
        tout=Sum("output_tokens"),
        cost=Sum(Cast(KT("attributes__belvedir.router.estimated_cost_micros"), BigIntegerField())),
        estimated=Count(
            "pk", filter=Q(attributes__has_key="belvedir.router.estimated_cost_micros")
        ),
    )
    if not totals["calls"]:
        return None
    return {
        "calls": totals["calls"],
        "tokens": (totals["tin"] or 0) + (totals["tout"] or 0),
        "cost_micros": totals["cost"] or 0,
        "estimated": totals["estimated"],
    }
