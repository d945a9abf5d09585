"""The trace pages (sessions, a session's span tree, tasks, task groups) and their API."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.traces.helpers import (
    body_of,
    llm_attributes,
    new_span_id,
    new_trace_id,
    post_outcome,
    post_traces,
    span,
)
from traces.models import Session, Span, TaskGroup
from traces.services.task_forming import tasks_form

pytestmark = pytest.mark.django_db


def html_of(response, status: int = 200) -> str:
    assert response.status_code == status, response.status_code
    return response.content.decode()


def session_links(html: str) -> list[str]:
    return re.findall(r'href="/traces/sessions/(ses_[0-9a-z]+)/"', html)


def make_session(
    key: str, session_id: str, *, model: str = "gpt-4o-mini", outcome: str | None = None
) -> Session:
    post_traces(
        key, body_of(span("openai.chat", attributes=llm_attributes(session_id, model=model)))
    )
    if outcome:
        post_outcome(key, {"session_id": session_id, "outcome": outcome})
    return Session.objects.get(external_id=session_id)


# --- sessions list ---------------------------------------------------------------------------


def test_the_sessions_page_lists_the_projects_sessions_with_their_counts(owner, capture, foreign):
    html = html_of(owner.web.get("/traces/"))

    assert "<html" in html and "<h1>Sessions</h1>" in html
    assert session_links(html) == [capture.pk]
    assert "run_capture_1" in html and "globex-secret" not in html
    assert ">success<" in html
    assert "gpt-4o-mini-2024" in html
    assert "<td>8</td><td>4</td><td>68</td>" in html  # spans, LLM calls, tokens


def test_the_sessions_page_needs_a_sign_in(client):
    response = client.get("/traces/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_sessions_filter_by_run(owner, running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))
    other = make_session(owner.key, "not-a-run")

    html = html_of(owner.web.get(f"/traces/?run={running_run.pk}"))

    run_session = Session.objects.get(run=running_run)
    assert session_links(html) == [run_session.pk]
    assert f'href="/runs/{running_run.pk}/"' in html
    assert other.pk not in html


def test_sessions_filter_by_outcome(owner):
    won = make_session(owner.key, "won", outcome="success")
    lost = make_session(owner.key, "lost", outcome="fail")
    open_ = make_session(owner.key, "open")

    assert session_links(html_of(owner.web.get("/traces/?outcome=success"))) == [won.pk]
    assert session_links(html_of(owner.web.get("/traces/?outcome=fail"))) == [lost.pk]
    assert session_links(html_of(owner.web.get("/traces/?outcome=none"))) == [open_.pk]
    assert len(session_links(html_of(owner.web.get("/traces/?outcome=")))) == 3


def test_sessions_filter_by_model(owner):
    mini = make_session(owner.key, "mini", model="gpt-4o-mini")
    make_session(owner.key, "claude", model="claude-sonnet-4")

    assert session_links(html_of(owner.web.get("/traces/?model=gpt-4o-mini"))) == [mini.pk]


def test_sessions_filter_by_time(owner):
    old = make_session(owner.key, "old")
    new = make_session(owner.key, "new")
    week_ago = timezone.now() - timedelta(days=7)
    Session.objects.filter(pk=old.pk).update(
        started_at=week_ago, ended_at=week_ago, last_received_at=week_ago
    )
    Session.objects.filter(pk=new.pk).update(started_at=timezone.now())
    three_days_ago = (timezone.now() - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")

    assert session_links(html_of(owner.web.get(f"/traces/?since={three_days_ago}"))) == [new.pk]
    assert session_links(html_of(owner.web.get(f"/traces/?until={three_days_ago}"))) == [old.pk]
    both = html_of(
        owner.web.get("/traces/", {"since": "2000-01-01T00:00:00+00:00", "until": "2999-01-01"})
    )
    assert set(session_links(both)) == {old.pk, new.pk}


@pytest.mark.parametrize(
    "query, field",
    [("outcome=maybe", "outcome"), ("since=notadate", "since"), ("until=2026-13-45", "until")],
)
def test_a_bad_filter_is_a_400_naming_the_field_and_lists_nothing(owner, capture, query, field):
    html = html_of(owner.web.get(f"/traces/?{query}"), status=400)

    assert 'id="filter-error"' in html and field in html
    assert session_links(html) == []

    fragment = owner.web.get(f"/traces/?{query}&fragment=table", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 400 and field in fragment.content.decode()


def test_sessions_come_25_a_page(owner):
    post_traces(
        owner.key,
        body_of(*(span(f"s{i}", attributes={"session.id": f"session-{i:02d}"}) for i in range(30))),
    )

    first = html_of(owner.web.get("/traces/"))
    second = html_of(owner.web.get("/traces/?page=2"))

    assert len(session_links(first)) == 25 and len(session_links(second)) == 5
    assert not set(session_links(first)) & set(session_links(second))
    assert "Page 1 of 2" in first and "page=2" in first


def test_the_sessions_list_does_not_join_the_runs(owner, running_run):
    """It shows only each session's run id: a join made PostgreSQL hash the whole runs table
    for a deep page (bench/scale.py, 100k runs)."""
    from traces import selectors

    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))
    sessions = selectors.sessions_for(project=owner.project, outcome="none")
    assert "runs_run" not in str(sessions.query)
    assert f'href="/runs/{running_run.pk}/"' in html_of(owner.web.get("/traces/?page=1"))


def test_the_filter_form_is_answered_with_the_table_fragment(owner, capture):
    response = owner.web.get("/traces/?outcome=success&fragment=table", HTTP_HX_REQUEST="true")

    html = html_of(response)
    assert html.lstrip().startswith('<div id="session-table"')
    assert "<html" not in html and "<h1>" not in html
    assert session_links(html) == [capture.pk]


def test_the_filter_form_keeps_a_plain_get_fallback(owner):
    html = html_of(owner.web.get("/traces/"))
    assert '<form method="get"' in html and 'hx-get="/traces/"' in html


def test_a_read_only_member_sees_the_sessions(readonly, capture):
    assert session_links(html_of(readonly.web.get("/traces/"))) == [capture.pk]


# --- a session ---------------------------------------------------------------------------------


def test_a_session_of_a_run_links_to_its_run(owner, running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))
    session = Session.objects.get(run=running_run)

    assert f'href="/runs/{running_run.pk}/"' in html_of(
        owner.web.get(f"/traces/sessions/{session.pk}/")
    )


def test_another_organizations_session_is_a_404_and_readers_may_look(
    owner, readonly, outsider, capture, foreign
):
    assert owner.web.get(f"/traces/sessions/{foreign.pk}/").status_code == 404
    assert outsider.web.get(f"/traces/sessions/{capture.pk}/").status_code == 404
    assert owner.web.get("/traces/sessions/ses_doesnotexist/").status_code == 404
    assert "run_capture_1" in html_of(readonly.web.get(f"/traces/sessions/{capture.pk}/"))


# --- tasks and task groups ---------------------------------------------------------------------


def test_the_tasks_page_lists_tasks_with_their_sessions(owner, capture, foreign):
    html = html_of(owner.web.get("/traces/tasks/"))

    for name in ["answer the question", "raw http", "failing task"]:
        assert f"<td>{name}</td>" in html
    assert f'href="/traces/sessions/{capture.pk}/"' in html
    assert "secret" not in html


def test_the_task_groups_page_lists_groups_with_success_and_fail(owner, capture, foreign):
    workflow_trace = new_trace_id()
    post_traces(
        owner.key,
        body_of(
            span(
                "answer the question.workflow",
                trace_id=workflow_trace,
                span_id=new_span_id(),
                attributes={
                    "session.id": "second",
                    "traceloop.span.kind": "workflow",
                    "traceloop.entity.name": "Answer the question",
                },
            ),
        ),
    )
    post_outcome(owner.key, {"session_id": "second", "outcome": "fail"})
    tasks_form(session=Session.objects.get(external_id="second"))

    html = html_of(owner.web.get("/traces/task-groups/"))

    group = TaskGroup.objects.get(project=owner.project, normalized_name="answer the question")
    assert f'href="/traces/task-groups/{group.pk}/"' in html
    assert "<td>2</td><td>1</td><td>1</td>" in html  # tasks, success, fail
    assert "secret" not in html

    detail = html_of(owner.web.get(f"/traces/task-groups/{group.pk}/"))
    assert "2 tasks · 1 success · 1 fail" in detail
    assert detail.count('href="/traces/sessions/') == 2


def test_another_organizations_task_group_is_a_404_and_readers_may_look(
    owner, readonly, capture, foreign
):
    theirs = TaskGroup.objects.get(project=foreign.project)
    ours = TaskGroup.objects.filter(project=owner.project).first()

    assert owner.web.get(f"/traces/task-groups/{theirs.pk}/").status_code == 404
    assert readonly.web.get(f"/traces/task-groups/{ours.pk}/").status_code == 200
    assert "answer the question" in html_of(readonly.web.get("/traces/task-groups/"))
    assert "answer the question" in html_of(readonly.web.get("/traces/tasks/"))


def test_the_task_pages_come_25_a_page(owner):
    spans = [
        span(
            f"job {i}.workflow",
            attributes={
                "session.id": "busy",
                "traceloop.span.kind": "workflow",
                "traceloop.entity.name": f"job {chr(97 + i)}{chr(97 + i)}",
            },
        )
        for i in range(26)
    ]
    post_traces(owner.key, body_of(*spans))
    tasks_form(session=Session.objects.get(external_id="busy"))

    assert html_of(owner.web.get("/traces/tasks/")).count("<tr><td>job ") == 25
    assert html_of(owner.web.get("/traces/tasks/?page=2")).count("<tr><td>job ") == 1
    assert "Page 1 of 2" in html_of(owner.web.get("/traces/task-groups/"))


# --- the API --------------------------------------------------------------------------------------


def test_the_api_lists_a_runs_sessions(owner, running_run, capture):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    response = owner.api.get(f"/api/v1/sessions?run={running_run.pk}")

    assert response.status_code == 200
    (row,) = response.json()["results"]
    assert row["session_id"] == running_run.pk and row["run"] == running_run.pk
    assert (
        row["llm_call_count"],
        row["input_tokens"],
        row["output_tokens"],
        row["total_tokens"],
    ) == (1, 12, 3, 15)
    assert response.json()["count"] == 1
    assert owner.api.get("/api/v1/sessions").json()["count"] == 2


def test_the_api_filters_sessions_like_the_page(owner):
    make_session(owner.key, "won", outcome="success")
    make_session(owner.key, "claude", model="claude-sonnet-4")

    def ids(query: str) -> list[str]:
        return [
            r["session_id"] for r in owner.api.get(f"/api/v1/sessions?{query}").json()["results"]
        ]

    assert ids("outcome=success") == ["won"]
    assert ids("model=claude-sonnet-4") == ["claude"]
    assert ids("outcome=none") == ["claude"]
    assert ids("since=2999-01-01") == []


@pytest.mark.parametrize(
    "query, field",
    [("outcome=maybe", "outcome"), ("since=notadate", "since"), ("until=yesterday", "until")],
)
def test_a_bad_api_filter_is_a_400_naming_the_field(owner, query, field):
    response = owner.api.get(f"/api/v1/sessions?{query}")

    assert response.status_code == 400
    assert field in response.json()


def test_the_api_gives_a_session_with_its_spans_llm_calls_and_tasks(owner, capture):
    response = owner.api.get(f"/api/v1/sessions/{capture.pk}")

    assert response.status_code == 200
    data = response.json()
    assert data["session_id"] == "run_capture_1" and data["outcome"] == "success"
    assert (data["span_count"], data["llm_call_count"], data["total_tokens"]) == (8, 4, 68)
    assert len(data["spans"]) == 8
    workflow = next(s for s in data["spans"] if s["name"] == "answer the question.workflow")
    assert workflow["span_kind"] == "workflow" and workflow["parent_span_id"] == ""
    assert len(data["llm_calls"]) == 4
    call = next(c for c in data["llm_calls"] if c["span_id"] == "a8c856a54b5c6625")
    assert call["model"] == "gpt-4o-mini-2024"
    assert call["input_messages"][1] == {"role": "user", "content": "2+2?"}
    assert call["output_messages"] == [{"role": "assistant", "content": "4"}]
    assert (call["input_tokens"], call["output_tokens"], call["total_tokens"]) == (20, 1, 21)
    assert call["duration_ms"] == pytest.approx(17.909, abs=0.01)
    assert sorted(t["name"] for t in data["tasks"]) == [
        "answer the question",
        "failing task",
        "raw http",
    ]


def test_the_session_api_gives_each_span_exactly_as_its_serializers_would(owner, capture):
    """The session API builds its spans from plain rows (fast at 500 a page): the same JSON as
    SpanSerializer and LlmCallSerializer (the schema's) give for the model instances."""
    from rest_framework.renderers import JSONRenderer

    from traces.api import LlmCallSerializer, SpanSerializer

    span = Span.objects.get(session=capture, name="POST")
    Span.objects.filter(pk=span.pk).update(  # events, a time off the second, no tokens
        events=[{"name": "retry", "attributes": {"n": 2}}],
        start_time=span.start_time.replace(microsecond=123456),
        input_tokens=None,
    )
    spans = list(Span.objects.filter(session=capture).order_by("start_time", "id"))

    def as_json(data):
        return json.loads(JSONRenderer().render(data))

    for zone in ("UTC", "Asia/Kolkata"):
        with timezone.override(zone):
            data = owner.api.get(f"/api/v1/sessions/{capture.pk}").json()
            assert data["spans"] == as_json(SpanSerializer(spans, many=True).data)
            llm = [s for s in spans if s.is_llm]
            assert data["llm_calls"] == as_json(LlmCallSerializer(llm, many=True).data)
    assert data["spans"][0]["start_time"].endswith("+05:30")
    assert any(s["events"] for s in data["spans"]) and len(data["llm_calls"]) == 4


def test_the_api_lists_task_groups_and_gives_one_with_its_tasks(owner, capture, foreign):
    response = owner.api.get("/api/v1/task-groups")

    assert response.status_code == 200
    groups = {g["normalized_name"]: g for g in response.json()["results"]}
    assert set(groups) == {"answer the question", "raw http", "failing task"}
    assert groups["answer the question"]["success_count"] == 1
    assert groups["answer the question"]["task_count"] == 1

    detail = owner.api.get(f"/api/v1/task-groups/{groups['raw http']['id']}")
    assert detail.status_code == 200
    (task,) = detail.json()["tasks"]
    assert (task["name"], task["kind"], task["llm_call_count"], task["session"]) == (
        "raw http",
        "workflow",
        2,
        capture.pk,
    )


def test_readers_may_read_through_the_api(readonly, capture):
    assert readonly.api.get("/api/v1/sessions").json()["count"] == 1
    assert readonly.api.get(f"/api/v1/sessions/{capture.pk}").status_code == 200
    assert readonly.api.get("/api/v1/task-groups").json()["count"] == 3


def test_another_organizations_sessions_and_groups_are_404_through_the_api(
    owner, outsider, capture, foreign
):
    theirs = TaskGroup.objects.get(project=foreign.project)

    assert owner.api.get(f"/api/v1/sessions/{foreign.pk}").status_code == 404
    assert owner.api.get(f"/api/v1/task-groups/{theirs.pk}").status_code == 404
    assert outsider.api.get(f"/api/v1/sessions/{capture.pk}").status_code == 404
    assert [r["session_id"] for r in outsider.api.get("/api/v1/sessions").json()["results"]] == [
        "globex-secret"
    ]
    assert outsider.api.get(f"/api/v1/sessions?run={capture.pk}").json()["count"] == 0


def test_the_api_needs_a_key_and_refuses_a_run_key(db, running_run):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/sessions").status_code in (401, 403)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {running_run.key}")
    assert client.get("/api/v1/sessions").status_code == 403
