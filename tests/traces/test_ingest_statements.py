"""What an ingest batch asks of PostgreSQL: its statements are prepared once per connection
(parsed and planned once, not for every batch), and its rows carry every column a span has."""

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


def test_a_stored_span_fills_every_column_of_the_spans_table_but_its_key():
    assert set(_COLUMNS) == {field.attname for field in Span._meta.concrete_fields} - {"id"}
