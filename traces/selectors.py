"""Trace reads. Lists take the project (views pass `access.project`)."""

from datetime import UTC, datetime

from django.db.models import QuerySet, Sum
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
    sessions = Session.objects.filter(project=project).select_related("run")
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


TREE_LIMIT = 1000


def session_tree(session: Session) -> list[tuple[int, Span]]:
    """The session's first TREE_LIMIT spans depth-first, each with its depth, children by start time."""
    spans = list(Span.objects.filter(session=session).order_by("start_time", "id")[:TREE_LIMIT])
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


def span_rows(tree: list[tuple[int, Span]]) -> tuple[list[dict], float]:
    """The tree as the session page nests it, each span with its waterfall bar, and the
    timeline's length in milliseconds.

    `children`: the span's subtree follows inside it; `closes`: how many enclosing spans end
    after it. `offset` and `width`: the bar's start and length, in percent of the time from
    the first span's start to the last span's end.
    """
    if not tree:
        return [], 0.0
    start = min(span.start_time for _, span in tree)
    end = max(span.end_time for _, span in tree)
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
    }
