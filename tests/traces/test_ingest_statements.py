"""What an ingest batch asks of PostgreSQL: its statements are prepared once per connection
(parsed and planned once, not for every batch) and outlive a migration under them, and its
rows carry every column a span has, each value in its own place."""

import contextlib
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from tests.traces.helpers import T0, body_of, llm_attributes, post_traces, span
from traces.models import Session, Span
from traces.services.ingest import _COLUMNS

pytestmark = pytest.mark.django_db


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_store_and_the_session_lookup_are_prepared_once_per_connection(owner):
    for i in range(3):  # the test client's requests share this thread's connection
        body = body_of(span(f"call {i}", attributes=llm_attributes("prepared")))
        assert post_traces(owner.key, body).status_code == 200

    statements = _prepared()
    assert sum("INSERT INTO traces_span" in s for s in statements) == 1, statements
    assert sum("FROM traces_session WHERE project_id" in s for s in statements) == 1, statements
    session = Session.objects.get(external_id="prepared")
    assert session.span_count == 3 == Span.objects.filter(session=session).count()


@contextlib.contextmanager
def _migration():
    """Another process's connection, as `manage.py migrate` would have while workers serve."""
    params = connection.get_connection_params()
    for name in ("cursor_factory", "context"):
        params.pop(name, None)
    with psycopg.connect(**params, autocommit=True) as other:
        yield other


@pytest.mark.django_db(transaction=True)  # autocommit between batches, as a worker serves
def test_batches_after_a_migration_retyping_a_session_column_are_stored(owner):
    assert post_traces(owner.key, body_of(span("before"))).status_code == 200
    retype = "ALTER TABLE traces_session ALTER COLUMN external_id TYPE varchar({})"
    length = Session._meta.get_field("external_id").max_length
    with _migration() as other:  # the prepared session lookup returns this column
        other.execute(retype.format(length + 1))
    try:
        # before: "cached plan must not change result type", a 503 for every batch on this
        # connection until it was closed
        assert post_traces(owner.key, body_of(span("after"))).status_code == 200
        assert post_traces(owner.key, body_of(span("later"))).status_code == 200
    finally:
        with _migration() as other:
            other.execute(retype.format(length))
        connection.close()  # its statements were prepared for the wider column

    assert set(Span.objects.values_list("name", flat=True)) == {"before", "after", "later"}


def test_a_stored_span_fills_every_column_of_the_spans_table_but_its_key():
    assert set(_COLUMNS) == {field.attname for field in Span._meta.concrete_fields} - {"id"}


def test_each_value_of_a_stored_span_lands_in_its_own_column(owner):
    # distinct values wherever two columns share a type, so a row out of _COLUMNS' order shows
    attributes = llm_attributes(
        "columns", "m-1", **{"traceloop.span.kind": "task", "traceloop.entity.name": "ent"}
    )
    attributes["gen_ai.usage.total_tokens"] = 20
    sent = span("call", parent="00000000000000ee", attributes=attributes, start=-86_400_000)
    sent["status"] = {"code": 2, "message": "boom"}
    body = body_of(sent, resource={"service.name": "svc"})
    body["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"] = "scope-1"
    before = timezone.now()

    assert post_traces(owner.key, body).status_code == 200

    stored = Span.objects.get()
    session = Session.objects.get(external_id="columns")
    start = datetime.fromtimestamp((T0 - 86_400_000_000_000) / 1e9, tz=UTC)
    assert (stored.project_id, stored.session_id, stored.run_id) == (
        owner.project.pk,
        session.pk,
        None,
    )
    assert (stored.trace_id, stored.span_id, stored.parent_span_id) == (
        sent["traceId"],
        sent["spanId"],
        "00000000000000ee",
    )
    assert (stored.name, stored.kind, stored.span_kind, stored.entity_name) == (
        "call",
        "internal",
        "task",
        "ent",
    )
    assert (stored.start_time, stored.end_time) == (start, start + timedelta(milliseconds=100))
    assert stored.duration_ms == 100 and stored.received_at >= before > stored.end_time
    assert (stored.status_code, stored.status_message) == ("error", "boom")
    assert stored.attributes == attributes and stored.events == []
    assert stored.resource == {"service.name": "svc"} and stored.scope_name == "scope-1"
    assert (stored.is_llm, stored.model) == (True, "m-1")
    assert [m["role"] for m in stored.input_messages + stored.output_messages] == [
        "user",
        "assistant",
    ]
    assert (stored.input_tokens, stored.output_tokens, stored.total_tokens) == (12, 3, 20)
