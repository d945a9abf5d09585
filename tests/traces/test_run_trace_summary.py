"""The run page pulls its trace summary from the traces app (an HTMX partial of the sessions page)."""

import pytest

from tests.traces.helpers import body_of, llm_attributes, post_traces, span
from traces.models import Session

pytestmark = pytest.mark.django_db


def html_of(response) -> str:
    return response.content.decode()


def test_the_run_page_links_to_its_session_with_llm_calls_and_tokens(owner, running_run):
    post_traces(
        running_run.key,
        body_of(
            *(span("openai.chat", attributes=llm_attributes(running_run.pk)) for _ in range(3))
        ),
    )
    session = Session.objects.get(run=running_run)

    page = html_of(owner.web.get(f"/runs/{running_run.pk}/"))
    summary = html_of(owner.web.get(run_summary_url(running_run), HTTP_HX_REQUEST="true"))

    assert f'hx-get="{run_summary_url(running_run).replace("&", "&amp;")}"' in page
    assert 'hx-trigger="load"' in page
    assert f'<a class="muted" href="/traces/?run={running_run.pk}">' in page  # without htmx
    assert summary.lstrip().startswith('<div id="run-traces">') and "<html" not in summary
    assert f'<a href="/traces/sessions/{session.pk}/">3 LLM calls · 45 tokens</a>' in summary


def test_a_run_without_traces_shows_no_trace_link(owner, running_run):
    assert "LLM calls" not in html_of(owner.web.get(f"/runs/{running_run.pk}/"))
    summary = owner.web.get(run_summary_url(running_run), HTTP_HX_REQUEST="true")
    assert summary.status_code == 200 and "LLM calls" not in html_of(summary)


def test_a_runs_trace_summary_is_404_to_outsiders_and_readable_by_readers(
    outsider, readonly, running_run
):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))
    assert outsider.web.get(run_summary_url(running_run), HTTP_HX_REQUEST="true").status_code == 404
    summary = readonly.web.get(run_summary_url(running_run), HTTP_HX_REQUEST="true")
    assert "1 LLM call ·" in html_of(summary)


def test_a_trace_summary_of_an_unknown_run_is_404(owner):
    response = owner.web.get("/traces/?run=run_nope&fragment=run-summary", HTTP_HX_REQUEST="true")
    assert response.status_code == 404


def run_summary_url(run) -> str:
    return f"/traces/?run={run.pk}&fragment=run-summary"


def test_the_run_tokens_fragment_counts_a_run_s_tokens_for_the_comparison(owner, running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))
    url = f"/traces/?run={running_run.pk}&fragment=run-tokens"
    html = html_of(owner.web.get(url, HTTP_HX_REQUEST="true"))
    assert html.strip().startswith(f'<span class="run-tokens" data-run="{running_run.pk}">')
    assert "1 LLM call<" in html and " tokens</a>" in html
