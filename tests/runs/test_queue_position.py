"""Runs beyond the workers' capacity wait queued with their place in the queue shown."""

from datetime import timedelta

from django.utils import timezone

from runs.selectors import queue_position


def test_queued_runs_show_their_place_in_the_platforms_queue(owner, outsider, make_run):
    now = timezone.now()
    first = make_run(status="queued", enqueued_at=now - timedelta(seconds=30))
    other_org = make_run(
        project=outsider.project, status="queued", enqueued_at=now - timedelta(seconds=20)
    )
    third = make_run(status="queued", enqueued_at=now - timedelta(seconds=10))
    running = make_run(status="running", enqueued_at=now - timedelta(seconds=60))
    # Workers serve every organization in turn: another tenant's earlier run is ahead.
    assert [queue_position(r) for r in (first, other_org, third)] == [1, 2, 3]
    assert queue_position(running) is None
    assert owner.api.get(f"/api/v1/runs/{third.pk}").json()["queue_position"] == 3
    assert owner.api.get(f"/api/v1/runs/{running.pk}").json()["queue_position"] is None
    listed = {r["id"]: r["queue_position"] for r in owner.api.get("/api/v1/runs").json()["results"]}
    assert listed[first.pk] == 1 and listed[third.pk] == 3
    page = owner.web.get(f"/runs/{third.pk}/").content.decode()
    assert "queued, position 3" in page
    fragment = owner.web.get(f"/runs/{third.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "queued, position 3" in fragment


def test_runs_enqueued_at_the_same_moment_get_distinct_places(owner, make_run):
    now = timezone.now()
    a, b = make_run(status="queued", enqueued_at=now), make_run(status="queued", enqueued_at=now)
    assert sorted([queue_position(a), queue_position(b)]) == [1, 2]
