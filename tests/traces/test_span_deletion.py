"""Deleting a project or an organization deletes its spans.

traces_span.project_id has no foreign-key constraint in the database (ingest saves a check
per span): the cascade is Django's collector's, and these pin it. A span without a session
is reached only through its project, so it shows the project cascade on its own.
"""

from django.db import connection
from django.utils import timezone

from tests.traces.helpers import fixture_bytes, post_traces
from traces.models import Session, Span


def _sessionless_span(project) -> Span:
    now = timezone.now()
    return Span.objects.create(
        project=project,
        trace_id="ab" * 16,
        span_id="cd" * 8,
        name="orphan.step",
        start_time=now,
        end_time=now,
    )


def _ingested(tenant) -> int:
    post_traces(tenant.key, fixture_bytes("sdk_batch.json"))
    return Span.objects.filter(project=tenant.project).count()


def test_project_delete_deletes_its_spans_and_no_one_elses(owner, outsider):
    assert _ingested(owner) > 0
    lone = _sessionless_span(owner.project)
    theirs = _ingested(outsider)

    owner.project.delete()

    assert not Span.objects.filter(project_id=owner.project.pk).exists()
    assert not Span.objects.filter(pk=lone.pk).exists()
    assert not Session.objects.filter(project_id=owner.project.pk).exists()
    assert Span.objects.filter(project=outsider.project).count() == theirs


def test_organization_delete_deletes_its_spans(owner, outsider):
    _ingested(owner)
    lone = _sessionless_span(owner.project)
    theirs = _ingested(outsider)
    project_id = owner.project.pk

    owner.org.delete()

    assert not Span.objects.filter(project_id=project_id).exists()
    assert not Span.objects.filter(pk=lone.pk).exists()
    assert Span.objects.filter(project=outsider.project).count() == theirs


def test_ingested_spans_project_is_their_sessions(owner, outsider):
    """What stands in for the dropped constraint on the ingest path: every stored span's
    project is its session's (sessions keep their own project constraint)."""
    assert _ingested(owner) > 0 and _ingested(outsider) > 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT se.project_id = sp.project_id, count(*) FROM traces_span AS sp JOIN traces_session AS se "
            "ON se.id = sp.session_id GROUP BY se.project_id = sp.project_id"
        )
        assert cursor.fetchall() == [(True, Span.objects.count())]
