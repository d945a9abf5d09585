"""Every index on the spans and sessions tables is written by each ingest batch (a span's row
on insert; a session's counters on every batch): only the indexes a query needs are kept."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _indexed_columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return {row[0].split(" USING btree ", 1)[1] for row in cursor.fetchall()}


def test_session_indexes_are_the_ones_queries_use():
    assert _indexed_columns("traces_session") == {
        "(id)",  # the key
        "(project_id, external_id)",  # the ingest's lookup of a batch's sessions; unique
        "(project_id, last_received_at DESC)",  # a project's sessions list, latest first
        "(last_received_at)",  # task forming: sessions quiet since a cutoff, any project
        "(run_id)",  # a run's sessions (run page, its deletion's SET NULL)
    }


def test_span_indexes_are_the_ones_queries_use():
    assert _indexed_columns("traces_span") == {
        "(id)",
        "(project_id, trace_id, span_id)",  # the insert's ON CONFLICT; unique
        "(session_id, start_time)",  # the session page
        "(run_id)",  # a run's deletion (SET NULL on its spans)
    }
