"""POST /api/v1/outcomes through the real endpoint, on PostgreSQL."""

import pytest

from tests.traces.helpers import (
    body_of,
    fixture_bytes,
    llm_attributes,
    post_outcome,
    post_traces,
    span,
)
from traces.models import Session

pytestmark = pytest.mark.django_db


# --- outcomes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["success", "fail"])
def test_an_outcome_right_after_the_flush_is_stored(owner, outcome):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    response = post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": outcome})

    assert response.status_code == 200
    assert response.json() == {"session_id": "run_capture_1", "outcome": outcome}
    session = Session.objects.get(external_id="run_capture_1")
    assert session.outcome == outcome and session.outcome_at is not None


def test_a_later_outcome_replaces_the_earlier_one(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": "success"})
    post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": "fail"})

    assert Session.objects.get().outcome == "fail"


def test_the_run_key_reports_its_own_sessions_outcome(running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    response = post_outcome(running_run.key, {"session_id": running_run.pk, "outcome": "success"})

    assert response.status_code == 200
    assert Session.objects.get(run=running_run).outcome == "success"


def test_an_outcome_for_an_unknown_session_is_a_404(owner, outsider):
    post_traces(outsider.key, fixture_bytes("sdk_batch.json"))  # another project's session

    for session_id in ["nobody", "run_capture_1"]:
        response = post_outcome(owner.key, {"session_id": session_id, "outcome": "success"})
        assert response.status_code == 404
        assert "session_id" in response.json()
    assert Session.objects.get().outcome == ""


@pytest.mark.parametrize("outcome", ["maybe", "SUCCESS", "", None, 1, ["success"]])
def test_any_other_outcome_is_a_400_naming_the_field(owner, outcome):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    response = post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": outcome})

    assert response.status_code == 400
    assert "outcome" in response.json()
    assert Session.objects.get().outcome == ""


@pytest.mark.parametrize(
    "raw",
    [
        b"{nope",
        b"",
        b"[]",
        b'"success"',
        b"\xff",
        b'{"outcome": "success"}',
        b'{"session_id": 5, "outcome": "fail"}',
    ],
    ids=["malformed", "empty", "array", "string", "not-utf8", "no-session", "session-not-string"],
)
def test_a_bad_outcome_body_is_a_400(owner, raw):
    response = post_outcome(owner.key, None, raw=raw)

    assert response.status_code == 400
    assert response.json()


def test_a_session_id_postgres_cannot_hold_is_a_404_not_a_500(owner):
    response = post_outcome(owner.key, {"session_id": "abc\u0000def", "outcome": "success"})

    assert response.status_code == 404


@pytest.mark.parametrize("key", [None, "bv_live_unknown", "wrong"])
def test_an_outcome_with_a_bad_key_is_a_401(owner, key):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    response = post_outcome(key, {"session_id": "run_capture_1", "outcome": "success"})

    assert response.status_code == 401
    assert Session.objects.get().outcome == ""
