"""The SQL that pairs one call's two spans (the client's and the router's) as a batch is
stored (traces/services/ingest.py's statement includes it)."""

from traces.models import Span

_SPAN_TABLE = Span._meta.db_table
# How far apart the client's and the router's starts of one call may be for a pair found
# without trace context (same run's session, model and token counts): pairs are one to one,
# so calls alike in all of that pair in either order and still count once each.
TWIN_WINDOW = "30 seconds"

# One call seen twice (docs/traces.md, "One call counts once"): the client's LLM span (an
# SDK's) and the router's span of it. The router's counts; the client's is stored with
# duplicate_of = the router's and counted nowhere. The router continues the client's W3C
# trace context (`traceparent`): its span is then in the client's trace, under the client's
# span (the pair by trace context); else the pair is by run session, model, token counts
# and start within TWIN_WINDOW. Whichever of the two arrives second makes the pair: a client
# span finds its router span as it is inserted (below), a router span marks its client span
# and takes that span's call out of its session's counters (_ROUTER_TWINS). Only spans of a
# run's sessions are looked at, by the (project, trace id, span id) and (session, start)
# indexes: batches of other sessions (the project key's, the ingest benchmark's) find none.
# Stored spans a batch's `loose` spans may pair with: of their sessions and TWIN_WINDOW,
# numbered by start among the ones alike (each side adds which spans are still unpaired).
_STORED_ALIKE = f"""
    SELECT m.id, m.session_id, m.model, m.input_tokens, m.output_tokens, m.start_time,
        row_number() OVER (
            PARTITION BY m.session_id, m.model, m.input_tokens, m.output_tokens
            ORDER BY m.start_time, m.id
        ) AS k
    FROM {_SPAN_TABLE} AS m
    WHERE m.session_id IN (SELECT session_id FROM loose)
        AND m.start_time BETWEEN (SELECT min(start_time) FROM loose) - interval '{TWIN_WINDOW}'
            AND (SELECT max(start_time) FROM loose) + interval '{TWIN_WINDOW}'"""

_CLIENT_TWINS = f"""
calls AS (  -- the batch's client LLM spans in a run's sessions
    SELECT i, r FROM rows WHERE (r->>{{is_llm}})::boolean AND r->>{{run}} IS NOT NULL
        AND NOT (r->>{{from_router}})::boolean
), traced AS (  -- those the router's span continues (by trace context): one to one
    SELECT c.i, l.id FROM calls AS c
    JOIN LATERAL (
        SELECT m.id FROM {_SPAN_TABLE} AS m
        WHERE m.project_id = c.r->>{{project}} AND m.trace_id = c.r->>{{trace}}
            AND m.parent_span_id = c.r->>{{span}} AND m.from_router
            AND m.run_id = c.r->>{{run}}
        LIMIT 1
    ) AS l ON true
), loose AS (  -- the others, numbered by start among the batch's calls alike
    SELECT c.i, c.r->>{{session}} AS session_id, c.r->>{{model}} AS model,
        (c.r->>{{tokens_in}})::integer AS tokens_in,
        (c.r->>{{tokens_out}})::integer AS tokens_out,
        (c.r->>{{start}})::timestamptz AS start_time,
        row_number() OVER (
            PARTITION BY c.r->>{{session}}, c.r->>{{model}}, c.r->>{{tokens_in}},
                c.r->>{{tokens_out}}
            ORDER BY (c.r->>{{start}})::timestamptz, c.i
        ) AS k
    FROM calls AS c WHERE c.i NOT IN (SELECT i FROM traced)
), free AS (  -- the router spans without trace context they may pair with, unpaired yet,
              -- numbered by start among the ones alike
{_STORED_ALIKE}
        AND m.from_router AND m.parent_span_id = ''
        AND NOT EXISTS (
            SELECT 1 FROM {_SPAN_TABLE} AS d WHERE d.session_id = m.session_id
                AND d.start_time BETWEEN m.start_time - interval '{TWIN_WINDOW}'
                    AND m.start_time + interval '{TWIN_WINDOW}'
                AND d.duplicate_of_id = m.id
        )
), twin AS (
    SELECT i, id FROM traced
    UNION ALL
    -- the k-th call alike pairs with the k-th router span alike (the nearest for each
    -- would give several calls of one batch the same span, and the rest none)
    SELECT l.i, f.id FROM loose AS l JOIN free AS f
        ON f.session_id = l.session_id AND f.model = l.model
            AND f.input_tokens = l.tokens_in AND f.output_tokens = l.tokens_out AND f.k = l.k
            AND f.start_time BETWEEN l.start_time - interval '{TWIN_WINDOW}'
                AND l.start_time + interval '{TWIN_WINDOW}'
),"""
_ROUTER_TWINS = f"""
traced AS (  -- each new router span continuing a stored client span's trace context
    SELECT n.id AS router_id, l.id FROM new AS n
    JOIN LATERAL (
        SELECT m.id FROM {_SPAN_TABLE} AS m
        WHERE n.parent_span_id <> '' AND m.project_id = n.project_id
            AND m.trace_id = n.trace_id AND m.span_id = n.parent_span_id
            AND m.run_id = n.run_id AND m.is_llm AND NOT m.from_router
            AND m.duplicate_of_id IS NULL
    ) AS l ON true
), loose AS (  -- the others, numbered by start among the batch's router spans alike
    SELECT n.id, n.session_id, n.model, n.input_tokens, n.output_tokens, n.start_time,
        row_number() OVER (
            PARTITION BY n.session_id, n.model, n.input_tokens, n.output_tokens
            ORDER BY n.start_time, n.id
        ) AS k
    FROM new AS n WHERE n.parent_span_id = '' AND n.is_llm AND n.session_id IS NOT NULL
), free AS (  -- the stored client spans they may pair with, unpaired yet, numbered alike
{_STORED_ALIKE}
        AND m.is_llm AND NOT m.from_router AND m.duplicate_of_id IS NULL
), twin AS (
    SELECT router_id, id FROM traced
    UNION ALL
    -- the k-th router span alike pairs with the k-th client span alike (the router settles
    -- calls in batches: the nearest for each would give several the same client span)
    SELECT l.id AS router_id, f.id FROM loose AS l JOIN free AS f
        ON f.session_id = l.session_id AND f.model = l.model
            AND f.input_tokens = l.input_tokens AND f.output_tokens = l.output_tokens
            AND f.k = l.k
            AND f.start_time BETWEEN l.start_time - interval '{TWIN_WINDOW}'
                AND l.start_time + interval '{TWIN_WINDOW}'
), marked AS (
    UPDATE {_SPAN_TABLE} AS d SET duplicate_of_id = t.router_id FROM twin AS t
    WHERE d.id = t.id
    RETURNING d.session_id, d.input_tokens, d.output_tokens
), removed AS (
    SELECT session_id, count(*) AS llm, coalesce(sum(input_tokens), 0) AS tokens_in,
        coalesce(sum(output_tokens), 0) AS tokens_out
    FROM marked GROUP BY session_id
),"""
_NO_REMOVED = """
removed AS (
    SELECT NULL::varchar AS session_id, 0 AS llm, 0 AS tokens_in, 0 AS tokens_out WHERE false
),"""
