"""What an ingest batch asks of PostgreSQL: its statements are prepared once per connection
(parsed and planned once, not for every batch) and outlive a migration under them, and its
rows carry every column a span has."""

import contextlib

import psycopg
import pytest
from django.db import connection

from tests.traces.helpers import body_of, llm_attributes, post_traces, span
from traces.models import Session, Span
from traces.services.ingest import _COLUMNS

pytestmark = pytest.mark.django_db


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
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


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
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
