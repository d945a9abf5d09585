"""Storing a decoded OTLP batch: sessions found or made, spans inserted once, counters grown."""

import dataclasses
import json
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from belvedir.models import ApiKey
from belvedir.text import counted
from runs import contract
from runs.models import Run
from runs.selectors import run_of_key
from runs.services import run_secret_values
from traces import otlp
from traces.models import Session, Span

TRACE_SESSION_PREFIX = "trace:"
RUN_SESSION_PREFIX = "run_"


@dataclasses.dataclass
class IngestOutcome:
    """How a batch went: spans given for storage (duplicates included) and spans refused."""

    accepted: int
    refused: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)


def _dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _resolve_session_ids(project, spans: list[otlp.SpanIn]) -> list[str]:
    """Each span's session id; spans lacking one take their trace's, else the trace itself."""
    own = [otlp.session_id_of(s.attributes, s.resource_attributes) for s in spans]
    by_trace: dict[str, str] = {}
    for span, sid in zip(spans, own, strict=True):
        if sid:
            by_trace.setdefault(span.trace_id, sid)
    missing = {
        s.trace_id
        for s, sid in zip(spans, own, strict=True)
        if not sid and s.trace_id not in by_trace
    }
    if missing:
        known = (
            Span.objects.filter(project=project, trace_id__in=missing, session__isnull=False)
            .values_list("trace_id", "session__external_id")
            .distinct()
        )
        for trace_id, external_id in known:
            by_trace.setdefault(trace_id, external_id)
    return [
        sid or by_trace.get(s.trace_id) or f"{TRACE_SESSION_PREFIX}{s.trace_id}"
        for s, sid in zip(spans, own, strict=True)
    ]


def _sessions_for(project, external_ids: set[str], run: Run | None) -> dict[str, Session]:
    sessions = {
        s.external_id: s
        for s in Session.objects.filter(project=project, external_id__in=external_ids)
    }
    missing = sorted(external_ids - sessions.keys())
    if missing:  # sorted, like every row lock below, so concurrent batches never deadlock
        now = timezone.now()
        Session.objects.bulk_create(
            [
                Session(
                    project=project, external_id=e, run=run, first_seen_at=now, last_received_at=now
                )
                for e in missing
            ],
            ignore_conflicts=True,
        )
        sessions.update(
            (s.external_id, s)
            for s in Session.objects.filter(project=project, external_id__in=missing)
        )
    # A harness uses BELVEDIR_RUN_ID as its session id: such a session belongs to that run.
    run_ids = {e for e in external_ids if e.startswith("run_")}
    runs_by_id = (
        {r.pk: r for r in Run.objects.filter(project=project, pk__in=run_ids)} if run_ids else {}
    )
    for external_id, session in sorted(sessions.items(), key=lambda item: item[1].pk):
        # A run key's own new sessions were created with its run above; an existing session
        # is claimed only by the run it is named after, never by whichever key writes to it.
        owner = runs_by_id.get(external_id)
        if session.run_id is None and owner is not None:
            session.run = owner
            Session.objects.filter(pk=session.pk, run__isnull=True).update(run=owner)
    return sessions


def _redacted(span: otlp.SpanIn, secrets: list[str]) -> otlp.SpanIn:
    return dataclasses.replace(
        span,
        name=contract.redact_text(span.name, secrets),
        status_message=contract.redact_text(span.status_message, secrets),
        attributes=contract.redact_json(span.attributes, secrets),
        events=contract.redact_json(span.events, secrets),
        resource_attributes=contract.redact_json(span.resource_attributes, secrets),
    )


def spans_ingest(*, key: ApiKey, spans: list[otlp.SpanIn]) -> IngestOutcome:
    """Store a batch in one transaction; spans already stored are skipped.

    A run key writes only into its own run's sessions (ones it starts, or the one named after
    its run): spans for another run's or the project's sessions are refused (counted as
    rejected), and the run's secrets are redacted from the spans it sends.

    On PostgreSQL the batch goes in as one `INSERT … SELECT FROM jsonb_populate_recordset`
    whose RETURNING says which spans were new, and each session's counters grow by exactly
    those (under row locks taken in id order): no per-row model objects, no client-side
    array quoting, and no recount of the whole session per batch. Elsewhere (SQLite in
    development) bulk_create and a recount do the same.
    """
    if not spans:
        return IngestOutcome(0)
    project = key.project
    run = run_of_key(key)
    if run is None and key.kind == ApiKey.Kind.RUN:  # a run key whose run is gone
        return IngestOutcome(0, len(spans), ["This run key belongs to no run."])
    external_ids = _resolve_session_ids(project, spans)
    refused = 0
    if run is not None:
        secrets = contract.secrets_for_redaction(run_secret_values(run))
        # A session named after another run of the project is that run's, even before it exists.
        named = {e for e in external_ids if e.startswith(RUN_SESSION_PREFIX) and e != run.pk}
        others = set(Run.objects.filter(project=project, pk__in=named).values_list("pk", flat=True))
        own = [e not in others for e in external_ids]
        refused = own.count(False)
        spans = [_redacted(s, secrets) for s, ok in zip(spans, own, strict=True) if ok]
        external_ids = [e for e, ok in zip(external_ids, own, strict=True) if ok]
    now = timezone.now()
    with transaction.atomic():
        sessions = _sessions_for(project, set(external_ids), run)
        rows = []
        for span, external_id in zip(spans, external_ids, strict=True):
            session = sessions[external_id]
            if run is not None and session.run_id != run.pk:
                refused += 1  # another run's or the project's session
                continue
            call = otlp.parse_llm_call(span.attributes)
            rows.append(
                {
                    "project_id": project.pk,
                    "session_id": session.pk,
                    "run_id": session.run_id,
                    "trace_id": span.trace_id,
                    "span_id": span.span_id,
                    "parent_span_id": span.parent_span_id,
                    "name": span.name[:500],
                    "kind": span.kind[:12],
                    "span_kind": (otlp.span_kind_of(span.attributes) or "")[:12],
                    "entity_name": otlp.entity_name_of(span.attributes, span.name)[:500],
                    "start_time": _dt(span.start_ns),
                    "end_time": _dt(span.end_ns),
                    "duration_ms": (span.end_ns - span.start_ns) / 1e6,
                    "status_code": span.status_code,
                    "status_message": span.status_message,
                    "attributes": span.attributes,
                    "events": span.events,
                    "resource": span.resource_attributes,
                    "scope_name": span.scope_name[:200],
                    "is_llm": call is not None,
                    "model": (call.model if call else "")[:200],
                    "input_messages": call.input_messages if call else [],
                    "output_messages": call.output_messages if call else [],
                    "input_tokens": call.input_tokens if call else None,
                    "output_tokens": call.output_tokens if call else None,
                    "total_tokens": call.total_tokens if call else None,
                    "received_at": now,
                }
            )
        session_ids = sorted({row["session_id"] for row in rows})  # refused ones untouched
        if rows and connection.vendor == "postgresql":
            _add_to_sessions(session_ids, _insert_spans(rows), now)
        elif rows:
            Span.objects.bulk_create(
                [Span(**row) for row in rows], ignore_conflicts=True, batch_size=500
            )
            _refresh_sessions(session_ids, now)
    errors = []
    if refused:
        errors.append(
            f"{counted(refused, 'span')} refused: a run key writes only into its own run's sessions."
        )
    return IngestOutcome(len(rows), refused, errors)


def _json_default(value):
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _insert_spans(rows: list[dict]) -> list[tuple]:
    """Insert the rows, skipping stored (project, trace id, span id); per session, what was new:
    (session id, spans, LLM spans, input tokens, output tokens, first start, last end,
    whether an LLM span with a model came).

    The rows' keys are the columns filled (a Span field added later needs its key there:
    no model defaults apply on this path).
    """
    qn = connection.ops.quote_name
    table = qn(Span._meta.db_table)
    columns = ", ".join(qn(c) for c in rows[0])
    sql = (
        f"WITH new AS (INSERT INTO {table} ({columns}) "
        f"SELECT {columns} FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb) "
        "ON CONFLICT DO NOTHING "
        "RETURNING session_id, is_llm, input_tokens, output_tokens, start_time, end_time, model) "
        "SELECT session_id, count(*), count(*) FILTER (WHERE is_llm), "
        "coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "min(start_time), max(end_time), coalesce(bool_or(is_llm AND model <> ''), false) "
        "FROM new GROUP BY session_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [json.dumps(rows, default=_json_default)])
        return cursor.fetchall()


_SESSIONS_ADD_SQL = f"""
UPDATE {Session._meta.db_table} AS s SET
    span_count = s.span_count + d.spans,
    llm_call_count = s.llm_call_count + d.llm,
    input_tokens = s.input_tokens + d.tokens_in,
    output_tokens = s.output_tokens + d.tokens_out,
    started_at = LEAST(s.started_at, d.started_at),
    ended_at = GREATEST(s.ended_at, d.ended_at),
    model = CASE WHEN d.new_model THEN COALESCE(
        (SELECT x.model FROM {Span._meta.db_table} AS x
         WHERE x.session_id = s.id AND x.is_llm AND x.model <> ''
         ORDER BY x.start_time DESC LIMIT 1),
        s.model) ELSE s.model END,
    last_received_at = %s
FROM jsonb_to_recordset(%s::jsonb) AS d(
    id text, spans integer, llm integer, tokens_in bigint, tokens_out bigint,
    started_at timestamptz, ended_at timestamptz, new_model boolean)
WHERE s.id = d.id
"""


def _add_to_sessions(session_ids: list[str], new: list[tuple], now) -> None:
    """Grow each session's counters by what this batch inserted (a retry adds nothing).

    The rows are locked in id order first, so concurrent batches neither deadlock nor lose
    each other's counts; the last model is read again once a session has a new LLM span.
    """
    keys = ("spans", "llm", "tokens_in", "tokens_out", "started_at", "ended_at", "new_model")
    added = {row[0]: dict(zip(keys, row[1:], strict=True)) for row in new}
    nothing = dict.fromkeys(keys, 0) | {"started_at": None, "ended_at": None, "new_model": False}
    deltas = [{"id": pk, **added.get(pk, nothing)} for pk in session_ids]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Session._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
            [session_ids],
        )
        cursor.execute(_SESSIONS_ADD_SQL, [now, json.dumps(deltas, default=_json_default)])


def _refresh_sessions(session_ids: list[str], now) -> None:
    """Recount from the stored spans, so a retried batch never counts twice (non-PostgreSQL)."""
    stats = (
        Span.objects.filter(session_id__in=session_ids)
        .values("session_id")
        .annotate(
            spans=Count("id"),
            llm=Count("id", filter=Q(is_llm=True)),
            tin=Sum("input_tokens"),
            tout=Sum("output_tokens"),
            start=Min("start_time"),
            end=Max("end_time"),
        )
    )
    for row in stats:
        last_model = (
            Span.objects.filter(session_id=row["session_id"], is_llm=True)
            .exclude(model="")
            .order_by("-start_time")
            .values_list("model", flat=True)
            .first()
        )
        Session.objects.filter(pk=row["session_id"]).update(
            span_count=row["spans"],
            llm_call_count=row["llm"],
            input_tokens=row["tin"] or 0,
            output_tokens=row["tout"] or 0,
            started_at=row["start"],
            ended_at=row["end"],
            model=(last_model or "")[:200],
            last_received_at=now,
        )
