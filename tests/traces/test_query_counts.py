"""Query counts pinned on the trace lists, the session page and the trace APIs, with a session
per run (30), tasks and task groups, and a session of 120 spans: an N+1 would add a query per
row and blow the bound."""

import html
import re

import pytest

from runs.models import Run
from tests.helpers.seed import assert_bounded
from traces import selectors
from traces.models import Span, TaskGroup

pytestmark = pytest.mark.django_db


def test_sessions_tasks_and_task_groups_pages_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    run = seeded.runs[0].pk
    group = TaskGroup.objects.filter(project=owner.project).order_by("pk").first().pk
    own_key = seeded.sessions[1]  # its run was launched with the user's own key
    Run.objects.filter(pk=own_key.run_id).update(model_proxied=True)
    pages = [
        ("/traces/", 7),
        (f"/traces/?run={run}", 7),
        ("/traces/?outcome=none", 7),
        ("/traces/?model=openai/gpt-4.1-mini", 7),
        ("/traces/?since=2000-01-01&until=2999-01-01", 7),
        # 120 spans, 30 tasks; a run's session as many; an own-key run's one more (the calls
        # its provider bills: only such a run makes any, so no other session asks)
        (f"/traces/sessions/{seeded.big_session.pk}/", 8),
        (f"/traces/sessions/{seeded.sessions[0].pk}/", 8),
        (f"/traces/sessions/{own_key.pk}/", 9),
        ("/traces/tasks/", 7),
        ("/traces/task-groups/", 7),
        (f"/traces/task-groups/{group}/", 9),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    assert "big-session" in owner.web.get("/traces/").content.decode()


def test_the_session_page_s_later_pages_and_a_span_s_details_take_a_fixed_number_of_queries(
    owner, seeded, monkeypatch, django_assert_max_num_queries
):
    """Pages of 50 of the 120-span session: the keyset pages after the first (one more query:
    the parents earlier pages showed) and a span opened, with htmx and as a page."""
    monkeypatch.setattr(selectors, "SPAN_PAGE", 50)
    session = seeded.big_session
    first = owner.web.get(f"/traces/sessions/{session.pk}/").content.decode()
    later = html.unescape(re.search(r'id="span-next"><a href="([^"]+)"', first)[1])
    llm = Span.objects.filter(session=session, is_llm=True).last()
    hx = {"headers": {"HX-Request": "true"}}
    pages = [
        (later, 9),
        (f"{later}&fragment=spans", hx, 7),
        (f"/traces/sessions/{session.pk}/spans/{llm.pk}/", 6),
        (f"/traces/sessions/{session.pk}/spans/{llm.pk}/", hx, 5),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    assert "Spans 51–100 of 120" in owner.web.get(later).content.decode()


def test_the_trace_apis_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    group = TaskGroup.objects.filter(project=owner.project).order_by("pk").first().pk
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    endpoints = [
        ("/api/v1/sessions", 3),
        (f"/api/v1/sessions?run={seeded.runs[0].pk}", 3),
        (f"/api/v1/sessions/{seeded.big_session.pk}", 4),
        ("/api/v1/task-groups", 3),
        (f"/api/v1/task-groups/{group}", 4),
    ]
    assert_bounded(owner.api, endpoints, django_assert_max_num_queries)
    assert len(owner.api.get(f"/api/v1/sessions/{seeded.big_session.pk}").json()["spans"]) == 120
