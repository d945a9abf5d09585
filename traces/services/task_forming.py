"""Forming tasks and task groups once a session has gone quiet."""

import re
from collections import defaultdict
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from traces.models import Outcome, Session, Span, Task, TaskGroup

_IDS = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{12,}\b|\d+",
    re.IGNORECASE,
)


def normalize_task_name(name: str) -> str:
    """Task names that differ only in ids, numbers, case or separators fall together."""
    name = _IDS.sub("#", name.lower())
    name = re.sub(r"[\s_\-.:/]+", " ", name)
    name = re.sub(r"(# ?)+", "#", name)
    return name.strip()[:300] or "#"


def _task_name(span: Span) -> str:
    name = span.entity_name or span.name
    return name.removesuffix(".workflow").removesuffix(".task")


def tasks_form(*, session: Session) -> list[Task]:
    """(Re)form a session's tasks: one per workflow or task span, else the whole session."""
    spans = list(Span.objects.filter(session=session).order_by("start_time"))
    children: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        if span.parent_span_id:
            children[(span.trace_id, span.parent_span_id)].append(span)

    def subtree(root: Span) -> list[Span]:
        out, stack = [], [root]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(children.get((node.trace_id, node.span_id), []))
        return out

    roots = [s for s in spans if s.span_kind in ("workflow", "task")]
    now = timezone.now()
    with transaction.atomic():
        # One former per session at a time: overlapping schedule ticks would duplicate tasks.
        Session.objects.select_for_update().filter(pk=session.pk).first()
        old_groups = set(session.tasks.exclude(group=None).values_list("group_id", flat=True))
        session.tasks.all().delete()
        tasks = []
        if roots:
            for root in roots:
                members = subtree(root)
                tasks.append(_task(session, root, _task_name(root), root.span_kind, members))
        else:
            first = next((s for s in spans if not s.parent_span_id), spans[0] if spans else None)
            name = _task_name(first) if first else session.external_id
            tasks.append(_task(session, None, name, "session", spans))
        for task in tasks:
            group, _ = TaskGroup.objects.get_or_create(
                project=session.project,
                normalized_name=task.normalized_name,
                defaults={"name": task.name},
            )
            task.group = group
        Task.objects.bulk_create(tasks)
        Session.objects.filter(pk=session.pk).update(tasks_formed_at=now)
        groups_refresh(old_groups | {t.group_id for t in tasks})
    return tasks


def _task(session: Session, root: Span | None, name: str, kind: str, members: list[Span]) -> Task:
    llm = [s for s in members if s.is_llm and s.duplicate_of_id is None]  # counted once
    return Task(
        project_id=session.project_id,
        session=session,
        span=root,
        name=name[:500],
        normalized_name=normalize_task_name(name),
        kind=kind,
        started_at=min((s.start_time for s in members), default=None),
        ended_at=max((s.end_time for s in members), default=None),
        llm_call_count=len(llm),
        total_tokens=sum(
            (s.total_tokens or (s.input_tokens or 0) + (s.output_tokens or 0)) for s in llm
        ),
        status="error"
        if any(s.status_code == "error" for s in ([root] if root else members))
        else "ok",
    )


def groups_refresh(group_ids: set[str]) -> None:
    """Recount each group's tasks and outcomes; a group left without tasks is deleted."""
    for group_id in group_ids:
        stats = Task.objects.filter(group_id=group_id).aggregate(
            n=Count("id"),
            ok=Count("id", filter=Q(session__outcome=Outcome.SUCCESS)),
            bad=Count("id", filter=Q(session__outcome=Outcome.FAIL)),
            last=Max("ended_at"),
        )
        if not stats["n"]:  # its last task was re-formed away
            TaskGroup.objects.filter(pk=group_id).delete()
            continue
        TaskGroup.objects.filter(pk=group_id).update(
            task_count=stats["n"],
            success_count=stats["ok"],
            fail_count=stats["bad"],
            last_seen_at=stats["last"] or timezone.now(),
        )


def quiet_sessions_form(*, quiet_seconds: int, limit: int = 200) -> int:
    """Form tasks for sessions quiet for `quiet_seconds` whose spans changed since last time."""
    cutoff = timezone.now() - timedelta(seconds=quiet_seconds)
    due = Session.objects.filter(last_received_at__lte=cutoff).filter(
        Q(tasks_formed_at__isnull=True) | Q(tasks_formed_at__lt=F("last_received_at"))
    )[:limit]
    count = 0
    for session in due:
        tasks_form(session=session)
        count += 1
    return count
