"""The data `bench/scale.py` measures with, inserted in bulk with `INSERT ... SELECT` over
`generate_series` (seconds, not the hours the ORM would take for a million spans).

Every column of a bulk table gets its value from a template instance the ORM builds (so the
NOT NULL columns Django fills in Python are filled here too), except the ones the caller
overrides with an SQL expression of `g` (the row number, from 0).

Shape (all counts are module constants):
* 50 organizations, each with its Default project, an owner, 10 harnesses. Organization 0
  ("the project" below) is the one measured; the others make the tables realistic.
* 100,000 runs: 20,000 in the project (2,000 of them of harness 0), 80,000 spread over the
  others. Statuses mostly succeeded, some failed/cancelled/running/queued; 5 model names; every
  10th run of the project against one of its 5 fine-tuned models, every 25th reporting a
  fine-tuned model's name as results.model; each succeeded run with its score's interval.
* 20,000 sessions: 4,000 in the project (each of its first 4,000 runs has one), one of them
  with 10,000 spans; 1,000,000 spans: 10,000 in that session, the rest spread evenly over the
  other 19,999 (about 50 each), every third an LLM call; parents make a tree of depth 2.
"""

from __future__ import annotations

import time

ORGS = 50
HARNESSES_PER_PROJECT = 10
RUNS = 100_000
PROJECT_RUNS = 20_000
HARNESS_RUNS = 2_000
SESSIONS = 20_000
PROJECT_SESSIONS = 4_000
SPANS = 1_000_000
BIG_SESSION_SPANS = 10_000
FINE_TUNED = 5
MODELS = ["gpt-4o-mini", "claude-3-5-haiku", "llama-3.1-8b", "qwen2.5-7b", "mistral-small"]
STATUSES = ["succeeded"] * 14 + ["failed", "failed", "cancelled", "running", "queued", "succeeded"]


def _bulk_insert(model, count: int, template, overrides: dict[str, str], params=()) -> None:
    """INSERT `count` rows of `model`: `overrides` (column -> SQL expression of g), the other
    columns as in `template`."""
    from django.db import connection

    cols, exprs, values = [], [], []
    fields = [
        f
        for f in model._meta.concrete_fields
        if not (
            f.primary_key and f.column not in overrides and getattr(template, f.attname) is None
        )
    ]
    for field in fields:
        cols.append(connection.ops.quote_name(field.column))
        if field.column in overrides:
            exprs.append(overrides[field.column])
        else:
            exprs.append("%s")
            values.append(field.get_db_prep_save(getattr(template, field.attname), connection))
    missing = set(overrides) - {f.column for f in model._meta.concrete_fields}
    if missing:
        raise ValueError(f"unknown columns {missing} for {model.__name__}")
    # Parameters appear in select-list order: template values and the overrides' own %s.
    ordered = []
    override_params = dict(params)
    for field in fields:
        if field.column in overrides:
            ordered.extend(override_params.get(field.column, ()))
        else:
            ordered.append(values.pop(0))
    sql = (
        f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({', '.join(cols)}) "
        f"SELECT {', '.join(exprs)} FROM generate_series(0, {count - 1}) AS g"
    )
    # A literal % (modulo) must be doubled next to the %s placeholders.
    sql = sql.replace("%s", "\0").replace("%", "%%").replace("\0", "%s")
    with connection.cursor() as cursor:
        cursor.execute(sql, ordered)


def seed() -> dict:
    """Insert everything; the ids and objects the benchmark needs."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from belvedir import services
    from belvedir.models import Project
    from harnesses.models import Harness
    from models_registry.models import FineTunedModel
    from runs.models import Run
    from traces.models import Session, Span

    timings = {}
    t0 = time.perf_counter()
    with transaction.atomic():
        # Unusable passwords: hashing 50 real ones takes a minute (the bench logs in by cookie).
        owners = get_user_model().objects.bulk_create(
            get_user_model()(username=f"owner{i}@scale.example", email=f"owner{i}@scale.example",
                             password="!")
            for i in range(ORGS)
        )  # fmt: skip
        orgs = [
            services.organization_create(name=f"Scale org {i}", owner=owners[i])
            for i in range(ORGS)
        ]
        projects = [Project.objects.get(organization=org) for org in orgs]
        project_ids = [p.pk for p in projects]
        harnesses = [
            Harness(
                id=f"har_s{p}_{h}",
                project=projects[p],
                name=f"harness-{p}-{h}",
                repo_url="https://example.com/bench.git",
                run_command="python run.py",
            )
            for p in range(ORGS)
            for h in range(HARNESSES_PER_PROJECT)
        ]
        Harness.objects.bulk_create(harnesses)
        fine_tuned = FineTunedModel.objects.bulk_create(
            FineTunedModel(
                id=f"ftm_s{i}",
                project=projects[0],
                name=f"my-lora-{i}",
                base_model="meta-llama/Llama-3.1-8B",
                adapter=f"adapters/bench/{i}.safetensors",
                created_by=owners[0],
            )
            for i in range(FINE_TUNED)
        )
    timings["orgs, users, harnesses"] = time.perf_counter() - t0
    now = timezone.now()

    # Runs: g < PROJECT_RUNS in the project; the others round-robin over projects 1..49.
    t0 = time.perf_counter()
    project_of_run = f"CASE WHEN g < {PROJECT_RUNS} THEN 0 ELSE 1 + (g % {ORGS - 1}) END"
    harness_of_run = (
        f"CASE WHEN g < {HARNESS_RUNS} THEN 0 "
        f"WHEN g < {PROJECT_RUNS} THEN 1 + (g % {HARNESSES_PER_PROJECT - 1}) "
        f"ELSE (g / {ORGS - 1}) % {HARNESSES_PER_PROJECT} END"
    )
    status = f"(%s::text[])[1 + (g * 7 % {len(STATUSES)})]"
    model = f"(%s::text[])[1 + (g % {len(MODELS)})]"
    ftm = f"CASE WHEN g < {PROJECT_RUNS} AND g % 10 = 3 THEN 'ftm_s' || (g / 10 % {FINE_TUNED}) END"
    terminal = f"({status}) IN ('succeeded', 'failed', 'cancelled')"
    score = f"CASE WHEN ({status}) = 'succeeded' THEN ((g * 37) % 100) / 100.0 END"
    results = (
        f"CASE WHEN ({status}) = 'succeeded' THEN jsonb_build_object('score', {score}, "
        f"'model', CASE WHEN g < {PROJECT_RUNS} AND g % 25 = 7 THEN 'my-lora-' || (g / 25 % "
        f"{FINE_TUNED}) ELSE ({model}) END, 'tasks', jsonb_build_object('t1', 1, 't2', 0)) END"
    )
    created = "%s::timestamptz - (g * interval '37 seconds')"
    template = Run(
        id="x", project=projects[0], harness_name="x", created_by=owners[0], log_tail="ok\n"
    )
    _bulk_insert(
        Run,
        RUNS,
        template,
        {
            "id": "'run_s' || g",
            "project_id": f"(%s::text[])[1 + ({project_of_run})]",
            "harness_id": f"'har_s' || ({project_of_run}) || '_' || ({harness_of_run})",
            "harness_name": f"'harness-' || ({project_of_run}) || '_' || ({harness_of_run})",
            "status": status,
            "model": model,
            "fine_tuned_model_id": ftm,
            "score": score,
            # the score's interval, as a run's end stores it (50 tasks: stderr ~0.05-0.07)
            "score_stderr": f"CASE WHEN ({status}) = 'succeeded' THEN 0.05 + (g % 3) / 100.0 END",
            "score_ci_low": f"CASE WHEN ({status}) = 'succeeded' THEN GREATEST(0, ({score}) - 0.1) END",
            "score_ci_high": f"CASE WHEN ({status}) = 'succeeded' THEN LEAST(1, ({score}) + 0.1) END",
            "n_tasks": f"CASE WHEN ({status}) = 'succeeded' THEN 50 END",
            "results": results,
            "created_at": created,
            "started_at": f"{created} + interval '2 seconds'",
            "finished_at": f"CASE WHEN {terminal} THEN {created} + interval '90 seconds' END",
        },
        params={
            "project_id": [project_ids],
            "status": [STATUSES],
            "model": [MODELS],
            "score": [STATUSES],
            "score_stderr": [STATUSES],
            "score_ci_low": [STATUSES, STATUSES],
            "score_ci_high": [STATUSES, STATUSES],
            "n_tasks": [STATUSES],
            "results": [STATUSES, STATUSES, MODELS],
            "created_at": [now],
            "started_at": [now],
            "finished_at": [STATUSES, now],
        },
    )
    timings["100,000 runs"] = time.perf_counter() - t0

    # Sessions: k < PROJECT_SESSIONS in the project (session k belongs to run k); session 0
    # is the big one.
    t0 = time.perf_counter()
    project_of_session = f"CASE WHEN g < {PROJECT_SESSIONS} THEN 0 ELSE 1 + (g % {ORGS - 1}) END"
    per_session = (SPANS - BIG_SESSION_SPANS) // (SESSIONS - 1)
    received = "%s::timestamptz - (g * interval '41 seconds')"
    _bulk_insert(
        Session,
        SESSIONS,
        Session(id="x", project=projects[0], external_id="x"),
        {
            "id": "'ses_s' || g",
            "project_id": f"(%s::text[])[1 + ({project_of_session})]",
            "external_id": "'agent-session-' || g",
            "run_id": f"CASE WHEN g < {PROJECT_SESSIONS} THEN 'run_s' || g END",
            "outcome": "(ARRAY['success', 'fail', ''])[1 + g % 3]",
            "model": f"(%s::text[])[1 + (g % {len(MODELS)})]",
            "span_count": f"CASE WHEN g = 0 THEN {BIG_SESSION_SPANS} ELSE {per_session} END",
            "llm_call_count": f"CASE WHEN g = 0 THEN {BIG_SESSION_SPANS // 3} "
            f"ELSE {per_session // 3} END",
            "input_tokens": "1000 + g % 5000",
            "output_tokens": "200 + g % 900",
            "started_at": f"{received} - interval '5 minutes'",
            "ended_at": received,
            "first_seen_at": f"{received} - interval '5 minutes'",
            "last_received_at": received,
        },
        params={
            "project_id": [project_ids],
            "model": [MODELS],
            "started_at": [now],
            "ended_at": [now],
            "first_seen_at": [now],
            "last_received_at": [now],
        },
    )
    timings["20,000 sessions"] = time.perf_counter() - t0

    # Spans: n < BIG_SESSION_SPANS in session 0 (index i = n); the others in session
    # k = 1 + m % 19999 with index i = m / 19999 (m = n - BIG_SESSION_SPANS). Span i's parent
    # is span 10 * (i / 10) of its session (span 0 for i a multiple of 10), span 0 is a root.
    t0 = time.perf_counter()
    big = BIG_SESSION_SPANS
    others = SESSIONS - 1
    session_k = f"CASE WHEN g < {big} THEN 0 ELSE 1 + (g - {big}) % {others} END"
    index_i = f"CASE WHEN g < {big} THEN g ELSE (g - {big}) / {others} END"
    parent_i = f"CASE WHEN ({index_i}) % 10 = 0 THEN 0 ELSE ({index_i}) / 10 * 10 END"
    parent_n = (
        f"CASE WHEN g < {big} THEN {parent_i} ELSE {big} + (({session_k}) - 1) "
        f"+ {others} * ({parent_i}) END"
    )
    project_of_span = f"CASE WHEN ({session_k}) < {PROJECT_SESSIONS} THEN 0 ELSE 1 + (({session_k}) % {ORGS - 1}) END"
    start = (
        f"%s::timestamptz - (({session_k}) * interval '41 seconds') "
        f"- interval '5 minutes' + (({index_i}) * interval '20 milliseconds')"
    )
    is_llm = "g % 3 = 1"
    _bulk_insert(
        Span,
        SPANS,
        Span(
            project=projects[0],
            trace_id="x",
            span_id="x",
            name="x",
            start_time=now,
            end_time=now,
            attributes={"traceloop.span.kind": "task", "llm.request.type": "chat"},
            resource={"service.name": "agent"},
        ),
        {
            "project_id": f"(%s::text[])[1 + ({project_of_span})]",
            "session_id": f"'ses_s' || ({session_k})",
            "run_id": f"CASE WHEN ({session_k}) < {PROJECT_SESSIONS} THEN 'run_s' || ({session_k}) END",
            "trace_id": f"lpad(to_hex({session_k}), 32, '0')",
            "span_id": "lpad(to_hex(g), 16, '0')",
            "parent_span_id": f"CASE WHEN ({index_i}) = 0 THEN '' "
            f"ELSE lpad(to_hex({parent_n}), 16, '0') END",
            "name": f"CASE WHEN {is_llm} THEN 'openai.chat' ELSE 'agent.step' END",
            "kind": f"CASE WHEN {is_llm} THEN 'llm' ELSE 'task' END",
            "start_time": start,
            "end_time": f"{start} + interval '15 milliseconds'",
            "duration_ms": "15",
            "is_llm": is_llm,
            "model": f"CASE WHEN {is_llm} THEN 'gpt-4o-mini' ELSE '' END",
            "input_messages": f"CASE WHEN {is_llm} THEN jsonb_build_array(jsonb_build_object("
            "'role', 'user', 'content', 'Solve task ' || g || ': find the bug in the parser.')) "
            "ELSE '[]'::jsonb END",
            "output_messages": f"CASE WHEN {is_llm} THEN jsonb_build_array(jsonb_build_object("
            "'role', 'assistant', 'content', 'The off-by-one is in line ' || g % 300)) "
            "ELSE '[]'::jsonb END",
            "input_tokens": f"CASE WHEN {is_llm} THEN 120 END",
            "output_tokens": f"CASE WHEN {is_llm} THEN 40 END",
            "total_tokens": f"CASE WHEN {is_llm} THEN 160 END",
        },
        params={"project_id": [project_ids], "start_time": [now], "end_time": [now]},
    )
    timings["1,000,000 spans"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    timings["ANALYZE"] = time.perf_counter() - t0
    return {
        "user": owners[0],
        "project": projects[0],
        "harness": "har_s0_0",
        "run": f"run_s{HARNESS_RUNS // 2 + 1}",
        "big_session": "ses_s0",
        "fine_tuned": fine_tuned[0].pk,
        "timings": timings,
    }


def existing() -> dict:
    """The ids `seed` returned, from a database seeded before (--reuse-db)."""
    from django.contrib.auth import get_user_model

    from belvedir.models import Project

    user = get_user_model().objects.get(email="owner0@scale.example")
    return {
        "user": user,
        "project": Project.objects.get(organization__name="Scale org 0"),
        "harness": "har_s0_0",
        "run": f"run_s{HARNESS_RUNS // 2 + 1}",
        "big_session": "ses_s0",
        "fine_tuned": "ftm_s0",
        "timings": {},
    }
