"""A project with enough rows that an N+1 query shows: runs across harnesses with results,
their sessions and spans, tasks and task groups, ledger entries and keys (for the query-count
tests: tests/*/test_query_counts.py)."""

import itertools
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from belvedir import services as core_services
from billing.models import LedgerEntry
from harnesses import services as harness_services
from runs.models import Run, Status
from traces.models import Session, Span
from traces.services.task_forming import tasks_form

MODELS = ["openai/gpt-4.1-mini", "anthropic/claude-sonnet-4", "qwen/qwen3-32b"]
_TRACES = itertools.count(1)
STATUSES = [Status.SUCCEEDED, Status.SUCCEEDED, Status.FAILED, Status.RUNNING, Status.QUEUED]


@dataclass
class Seeded:
    harnesses: list
    runs: list
    sessions: list
    big_session: Session


def seed(tenant, *, runs: int = 30, spans_per_session: int = 4, big_session_spans: int = 120):
    """`runs` runs over three harnesses (every status, three models, scores and per-task
    results), a session of spans per run (each with a workflow span and LLM calls, tasks
    formed), one session of `big_session_spans` spans, ledger entries and API keys."""
    project, user = tenant.project, tenant.user
    harnesses = [
        harness_services.harness_create(
            project=project,
            name=f"Harness {i}",
            repo_url=f"https://github.com/example/harness-{i}.git",
            install_command="true",
            run_command="python run.py",
            created_by=user,
        )
        for i in range(3)
    ]
    now = timezone.now()
    made = []
    for i in range(runs):
        harness = harnesses[i % 3]
        status = STATUSES[i % len(STATUSES)]
        done = status in (Status.SUCCEEDED, Status.FAILED)
        made.append(
            Run.objects.create(
                project=project,
                harness=harness,
                harness_name=harness.name,
                status=status,
                model=MODELS[i % 3],
                created_by=user,
                created_at=now - timedelta(minutes=runs - i),
                started_at=now - timedelta(minutes=runs - i) if status != Status.QUEUED else None,
                finished_at=now - timedelta(minutes=runs - i - 1) if done else None,
                score=(i % 10) / 10 if done else None,
                results={"score": (i % 10) / 10, "tasks": {f"t{j}": j % 2 for j in range(5)}}
                if done
                else None,
            )
        )
    sessions = [
        _session(project, f"s-{run.pk}", spans_per_session, run=run, start=now) for run in made
    ]
    big = _session(project, "big-session", big_session_spans, run=None, start=now)
    for session in [*sessions, big]:
        tasks_form(session=session)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            organization=tenant.org,
            kind="credit",
            amount_micros=1_000_000 * (i + 1),
            reference=f"grant {i}",
            created_by=user,
        )
        for i in range(runs)
    )
    for i in range(5):
        core_services.api_key_create(project=project, name=f"key {i}", created_by=user)
    return Seeded(harnesses, made, sessions, big)


def _session(project, external_id: str, count: int, *, run, start) -> Session:
    """A session of `count` spans: a workflow per trace of 4, each with a task, an LLM call and a tool."""
    session = Session.objects.create(
        project=project,
        external_id=external_id,
        run=run,
        model=MODELS[0],
        span_count=count,
        started_at=start,
        ended_at=start + timedelta(seconds=count),
    )
    spans = []
    first = next(_TRACES)
    for i in range(count):
        trace, position = divmod(i, 4)
        trace_id = f"{first:016x}{trace:016x}"
        kind = ["workflow", "task", "llm", "tool"][position]
        llm = kind == "llm"
        begin = start + timedelta(seconds=i)
        spans.append(
            Span(
                project=project,
                session=session,
                run=run,
                trace_id=trace_id,
                span_id=f"{i + 1:016x}",
                parent_span_id="" if position == 0 else f"{trace * 4 + 1:016x}",
                name=f"step {trace}.{kind}",
                span_kind="" if llm else kind,
                entity_name=f"step {trace}",
                start_time=begin,
                end_time=begin + timedelta(milliseconds=500),
                duration_ms=500,
                attributes={"traceloop.span.kind": kind},
                is_llm=llm,
                model=MODELS[0] if llm else "",
                input_messages=[{"role": "user", "content": "2+2?"}] if llm else [],
                output_messages=[{"role": "assistant", "content": "4"}] if llm else [],
                input_tokens=10 if llm else None,
                output_tokens=2 if llm else None,
                total_tokens=12 if llm else None,
            )
        )
    Span.objects.bulk_create(spans)
    return session


def assert_bounded(client, pages: list[tuple], assert_max_num_queries) -> None:
    """GET each page, `(url, bound)` or `(url, headers, bound)`, within its query bound
    (pytest-django's django_assert_max_num_queries), answering 200."""
    for url, *headers, bound in pages:
        with assert_max_num_queries(bound, info=url):
            response = client.get(url, **(headers[0] if headers else {}))
        assert response.status_code == 200, (url, response.content[:300])
