"""What an ingest batch asks of PostgreSQL: its rows carry every column a span has."""

from traces.models import Span
from traces.services.ingest import _COLUMNS


def test_a_stored_span_fills_every_column_of_the_spans_table_but_its_key():
    assert set(_COLUMNS) == {field.attname for field in Span._meta.concrete_fields} - {"id"}
