"""Storing a decoded OTLP batch: sessions found or made, spans inserted once, counters grown."""

import contextlib
import dataclasses
import functools
import json
from datetime import UTC, datetime

import orjson
import psycopg
from django.db import connection, transaction
from django.utils import timezone

from belvedir.models import ApiKey
from belvedir.text import counted
from runs import contract
from runs.models import Run
from runs.selectors import run_of_key, run_secret_values
from traces import otlp
from traces.models import Session, Span
from traces.services.twins import _CLIENT_TWINS, _NO_REMOVED, _ROUTER_TWINS

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


def _sessions_for(project, external_ids: set[str]) -> tuple[dict, bool]:
    """Each external id's session as ``{external id: (session id, run id)}``, and whether
    sessions had to be made or claimed (then the caller holds a transaction around this)."""
    if not external_ids:
        return {}, False
    with _psycopg_cursor() as cursor:  # every batch asks: plain SQL, one prepared text
        _execute_prepared(cursor, _SESSIONS_SQL, [project.pk, list(external_ids)])
        sessions = {e: (pk, run_id) for pk, e, run_id in cursor.fetchall()}
    missing = sorted(external_ids - sessions.keys())
    # A harness uses BELVEDIR_RUN_ID as its session id: such a session belongs to that run.
    named = {e for e in external_ids if e.startswith(RUN_SESSION_PREFIX)}
    unclaimed = {e for e in named if sessions.get(e, (None, None))[1] is None}
    return sessions, bool(missing or unclaimed)


def _sessions_make(project, sessions: dict, external_ids: set[str], run: Run | None) -> None:
    """Make the missing sessions and hand the ones named after a run to that run (in place)."""
    missing = sorted(external_ids - sessions.keys())
    if missing:  # sorted, like every row lock below, so concurrent batches never deadlock
        now = timezone.now()
        Session.objects.bulk_create(
            [
                Session(
                    project=project,
                    external_id=e,
                    run=run,
                    model=run.model if run else "",
                    first_seen_at=now,
                    last_received_at=now,
                )
                for e in missing
            ],
            ignore_conflicts=True,
        )
        made = Session.objects.filter(project=project, external_id__in=missing)
        sessions.update(
            (e, (pk, run_id)) for pk, e, run_id in made.values_list("pk", "external_id", "run")
        )
    run_ids = {e for e in external_ids if e.startswith(RUN_SESSION_PREFIX)}
    runs_by_id = (
        {r.pk: r for r in Run.objects.filter(project=project, pk__in=run_ids)} if run_ids else {}
    )
    for external_id, (pk, run_id) in sorted(sessions.items(), key=lambda item: item[1][0]):
        # A run key's own new sessions were created with its run above; an existing session
        # is claimed only by the run it is named after, never by whichever key writes to it.
        owner = runs_by_id.get(external_id)
        if run_id is None and owner is not None:
            Session.objects.filter(pk=pk, run__isnull=True).update(run=owner, **_run_model(owner))
            sessions[external_id] = (pk, owner.pk)


def _run_model(run: Run) -> dict:
    """A run's session shows the model under test, its launch model (not its judge's, nor
    whichever model it called last): kept with no model_started_at, which no span replaces."""
    return {"model": run.model, "model_started_at": None} if run.model else {}


def _redacted(span: otlp.SpanIn, secrets: list[str]) -> otlp.SpanIn:
    return dataclasses.replace(
        span,
        name=contract.redact_text(span.name, secrets),
        status_message=contract.redact_text(span.status_message, secrets),
        attributes=contract.redact_json(span.attributes, secrets),
        events=contract.redact_json(span.events, secrets),
        resource_attributes=contract.redact_json(span.resource_attributes, secrets),
    )


def spans_ingest(
    *, key: ApiKey, spans: list[otlp.SpanIn], from_router: bool = False
) -> IngestOutcome:
    """Store a batch in one transaction; spans already stored are skipped. `from_router`:
    the router's own record of its calls (never an upload's), whose tokens count where a
    client span records the same call too (_CLIENT_TWINS).

    A run key writes only into its own run's sessions (ones it starts, or the one named after
    its run): spans for another run's or the project's sessions are refused (counted as
    rejected), and the run's secrets are redacted from the spans it sends.

    On PostgreSQL, once the sessions exist, the batch is ONE statement (see _STORE_SQL): an
    `INSERT … SELECT FROM jsonb_array_elements` of the rows (arrays in _COLUMNS' order) as
    one orjson-encoded parameter, whose RETURNING says which spans were new, and each
    session's counters grow by exactly those under row locks taken in id order: no per-row
    model objects, no recount of the whole session, three round trips per request (key,
    sessions, statement), the last two prepared once per connection.
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
    sessions, writes = _sessions_for(project, set(external_ids))
    # One statement stores the spans and grows the counters when the sessions all exist;
    # making or claiming sessions first goes in one transaction with it.
    with transaction.atomic() if writes else contextlib.nullcontext():
        if writes:
            _sessions_make(project, sessions, set(external_ids), run)
        rows = []
        project_id = project.pk
        for span, external_id in zip(spans, external_ids, strict=True):
            session_id, session_run_id = sessions[external_id]
            if run is not None and session_run_id != run.pk:
                refused += 1  # another run's or the project's session
                continue
            attributes = span.attributes
            call = otlp.parse_llm_call(attributes)
            kind = otlp.span_kind_of(attributes)
            rows.append(  # in _COLUMNS' order
                (
                    project_id,
                    session_id,
                    session_run_id,
                    span.trace_id,
                    span.span_id,
                    span.parent_span_id,
                    span.name[:500],
                    span.kind[:12],
                    (kind or "")[:12],
                    otlp.entity_name_of(attributes, span.name)[:500],
                    _dt(span.start_ns),
                    _dt(span.end_ns),
                    (span.end_ns - span.start_ns) / 1e6,
                    span.status_code,
                    span.status_message,
                    attributes,
                    span.events,
                    span.resource_attributes,
                    span.scope_name[:200],
                    call is not None,
                    (call.model if call else "")[:200],
                    call.input_messages if call else [],
                    call.output_messages if call else [],
                    call.input_tokens if call else None,
                    call.output_tokens if call else None,
                    call.total_tokens if call else None,
                    from_router,
                    None,  # duplicate_of: found by the statement
                    now,
                )
            )
        session_ids = sorted({row[_SESSION] for row in rows})  # refused ones untouched
        if rows:
            _store(rows, session_ids, now, from_router=from_router)
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


def _json(rows: list[tuple]) -> str:
    """The rows as JSON text: orjson (datetimes as ISO 8601), else the standard library,
    which writes what orjson refuses (a lone surrogate) for PostgreSQL to refuse as before."""
    try:
        return orjson.dumps(rows).decode()
    except TypeError:
        return json.dumps(rows, default=_json_default)


_SPAN_TABLE = Span._meta.db_table
_SESSION_TABLE = Session._meta.db_table
# The columns a stored span fills, in the order of spans_ingest's row tuples (a Span field
# added later needs its place here and there: no model defaults apply on this path).
# duplicate_of_id's place holds None: the statement finds the span's twin itself.
_COLUMNS = (
    "project_id", "session_id", "run_id", "trace_id", "span_id", "parent_span_id", "name",
    "kind", "span_kind", "entity_name", "start_time", "end_time", "duration_ms", "status_code",
    "status_message", "attributes", "events", "resource", "scope_name", "is_llm", "model",
    "input_messages", "output_messages", "input_tokens", "output_tokens", "total_tokens",
    "from_router", "duplicate_of_id", "received_at",
)  # fmt: skip
_SESSION = _COLUMNS.index("session_id")
_SESSIONS_SQL = (
    f"SELECT id, external_id, run_id FROM {_SESSION_TABLE} "
    "WHERE project_id = %s AND external_id = ANY(%s)"
)

# The spans go in from one JSON parameter, an array of rows that are arrays in _COLUMNS'
# order (objects cost PostgreSQL a sort of every row's keys while parsing and a key search
# per column while reading: ~1.5 ms of its ~6 ms a batch), skipping a stored (project,
# trace id, span id); what was new and counts (no duplicate) is summed per session, less
# the client spans a router batch found to be its duplicates; then the sessions are locked
# in id order (the Sort below the row locks needs the whole insert first, so every batch
# takes span locks before session locks, and session locks in one order: no deadlocks) and
# their counters grow by exactly that (a retried batch adds nothing), in the same statement.
# A session's model is its latest LLM span's: a new one wins when it started no earlier
# than the one the model came from (model_started_at, re-read under the row lock); a run's
# session keeps its run's model (set with no model_started_at when it was made or claimed).
_STORE_SQL = f"""
WITH rows AS (
    SELECT t.i, t.r FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(r, i)
), {{client_twins}}
new AS (
    INSERT INTO {_SPAN_TABLE} ({{columns}})
    SELECT {{values}} FROM rows AS x {{twin_join}}
    ON CONFLICT DO NOTHING
    RETURNING id, project_id, session_id, run_id, trace_id, parent_span_id, is_llm,
        input_tokens, output_tokens, start_time, end_time, model, duplicate_of_id
), {{router_twins}}
added AS (
    SELECT session_id, count(*) AS spans,
        count(*) FILTER (WHERE is_llm AND duplicate_of_id IS NULL) AS llm,
        coalesce(sum(input_tokens) FILTER (WHERE duplicate_of_id IS NULL), 0) AS tokens_in,
        coalesce(sum(output_tokens) FILTER (WHERE duplicate_of_id IS NULL), 0) AS tokens_out,
        min(start_time) AS started_at, max(end_time) AS ended_at,
        max(start_time) FILTER (WHERE is_llm AND model <> '') AS model_at,
        (array_agg(model ORDER BY start_time DESC) FILTER (WHERE is_llm AND model <> ''))[1]
            AS model
    FROM new GROUP BY session_id
), locked AS MATERIALIZED (
    SELECT s.id, s.id = ANY(%s) AS batch, a.spans, a.llm, a.tokens_in, a.tokens_out,
        a.started_at, a.ended_at, a.model_at, a.model,
        s.run_id IS NOT NULL AND s.model <> '' AND s.model_started_at IS NULL AS run_model,
        r.llm AS gone, r.tokens_in AS gone_in, r.tokens_out AS gone_out
    FROM {_SESSION_TABLE} AS s LEFT JOIN added AS a ON a.session_id = s.id
        LEFT JOIN removed AS r ON r.session_id = s.id
    WHERE s.id = ANY(%s) OR s.id IN (SELECT session_id FROM removed)
    ORDER BY s.id FOR NO KEY UPDATE OF s
)
UPDATE {_SESSION_TABLE} AS s SET
    span_count = s.span_count + coalesce(d.spans, 0),
    llm_call_count = s.llm_call_count + coalesce(d.llm, 0) - coalesce(d.gone, 0),
    input_tokens = s.input_tokens + coalesce(d.tokens_in, 0) - coalesce(d.gone_in, 0),
    output_tokens = s.output_tokens + coalesce(d.tokens_out, 0) - coalesce(d.gone_out, 0),
    started_at = LEAST(s.started_at, d.started_at),
    ended_at = GREATEST(s.ended_at, d.ended_at),
    model = CASE WHEN NOT d.run_model AND d.model_at >= coalesce(s.model_started_at, '-infinity')
        THEN d.model ELSE s.model END,
    model_started_at = CASE WHEN d.run_model THEN NULL
        ELSE GREATEST(s.model_started_at, d.model_at) END,
    last_received_at = CASE WHEN d.batch THEN %s ELSE s.last_received_at END
FROM locked AS d WHERE s.id = d.id
"""


@functools.cache
def _store_sql(from_router: bool) -> str:
    """_STORE_SQL for client batches or the router's, with the columns, each read from its
    place in a row: JSON as it is, text as text (the column's length checked as an INSERT's
    text is), the rest cast from text; a client span's duplicate_of from its twin."""
    fields = {field.attname: field for field in Span._meta.concrete_fields}
    values = []
    for i, field in enumerate(fields[name] for name in _COLUMNS):
        db_type = field.cast_db_type(connection)
        if field.attname == "duplicate_of_id":
            values.append("NULL::bigint" if from_router else "twin.id")
        elif field.get_internal_type() == "JSONField":
            values.append(f"r->{i}")
        elif db_type == "text" or db_type.startswith("varchar"):
            values.append(f"r->>{i}")
        else:
            values.append(f"(r->>{i})::{db_type}")
    columns = ", ".join(connection.ops.quote_name(name) for name in _COLUMNS)
    places = {
        "project": "project_id", "session": "session_id", "run": "run_id",
        "trace": "trace_id", "span": "span_id", "start": "start_time", "is_llm": "is_llm",
        "model": "model", "tokens_in": "input_tokens", "tokens_out": "output_tokens",
        "from_router": "from_router",
    }  # fmt: skip
    client_twins = _CLIENT_TWINS.format(**{k: _COLUMNS.index(v) for k, v in places.items()})
    return _STORE_SQL.format(
        columns=columns,
        values=", ".join(values),
        client_twins="" if from_router else client_twins,
        twin_join="" if from_router else "LEFT JOIN twin ON twin.i = x.i",
        router_twins=_ROUTER_TWINS if from_router else _NO_REMOVED,
    )


def _store(rows: list[tuple], session_ids: list[str], now, *, from_router: bool) -> None:
    """Insert the rows and grow their sessions' counters by what was new: one statement."""
    with _psycopg_cursor() as cursor:  # the JSON as a parameter, not lexed from the SQL text
        _execute_prepared(
            cursor, _store_sql(from_router), [_json(rows), session_ids, session_ids, now]
        )


@contextlib.contextmanager
def _psycopg_cursor():
    """A server-side binding cursor of psycopg's own on Django's connection (same
    transaction), on which a statement executed with `prepare=True` is parsed and planned
    once per connection (the OPTIONS' prepare_threshold in settings lets psycopg prepare;
    about 1 ms of PostgreSQL's CPU a batch for the store statement). Errors come out as
    Django's, as elsewhere."""
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        yield cursor


def _execute_prepared(cursor, sql: str, params: list) -> None:
    """Execute `sql` prepared (once per connection). A statement prepared before a migration
    changed the type of a column it returns fails from then on ("cached plan must not change
    result type"), and psycopg keeps using it: every batch on a long-lived connection would
    fail until the connection is closed. Then the connection's prepared statements are
    dropped (DEALLOCATE ALL, which psycopg follows) and, outside a transaction (where the
    failed statement did nothing), it runs again, prepared afresh; in a transaction the
    rollback that follows drops them (psycopg clears them on rollback)."""
    try:
        cursor.execute(sql, params, prepare=True)
    except psycopg.errors.FeatureNotSupported:
        if not connection.get_autocommit():
            raise
        cursor.execute("DEALLOCATE ALL")
        cursor.execute(sql, params, prepare=True)
