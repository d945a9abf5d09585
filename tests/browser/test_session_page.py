"""The session page in a real browser: "Load more" appends the next page of spans to the tree,
and opening a span's details loads its messages and attributes (htmx)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from traces import selectors
from traces.models import Session, Span

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def session(owner, monkeypatch) -> Session:
    """Five spans, pages of three: a workflow with an LLM call and a tool, then two more."""
    monkeypatch.setattr(selectors, "SPAN_PAGE", 3)
    session = Session.objects.create(project=owner.project, external_id="paged-session")
    t0 = timezone.now() - timedelta(minutes=1)

    def span(span_id: str, parent: str, name: str, start_ms: int, **fields) -> Span:
        return Span.objects.create(
            project=owner.project,
            session=session,
            trace_id="b" * 32,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            start_time=t0 + timedelta(milliseconds=start_ms),
            end_time=t0 + timedelta(milliseconds=start_ms + 100),
            duration_ms=100,
            **fields,
        )

    span("0000000000000001", "", "agent workflow", 0)
    span(
        "0000000000000002",
        "0000000000000001",
        "openai.chat",
        10,
        is_llm=True,
        model="gpt-4o-mini",
        input_tokens=12,
        output_tokens=3,
        input_messages=[{"role": "user", "content": "What is 2+2?"}],
        output_messages=[{"role": "assistant", "content": "Four."}],
        attributes={"gen_ai.request.temperature": 0.2},
    )
    span("0000000000000003", "0000000000000001", "run tool", 20)
    span("0000000000000004", "0000000000000001", "late tool", 200)
    span("0000000000000005", "", "second workflow", 300)
    # As ingest keeps them: the session's first start and last end (the bars' timeline).
    Session.objects.filter(pk=session.pk).update(
        span_count=5,
        llm_call_count=1,
        started_at=t0,
        ended_at=t0 + timedelta(milliseconds=400),
    )
    return session


def test_load_more_appends_spans_and_opening_a_span_loads_its_messages(signed_in_page, session):
    page = signed_in_page
    page.goto(f"/traces/sessions/{session.pk}/")
    tree = page.locator("#span-tree")
    names = tree.locator("details.span > summary strong")
    expect(names).to_have_text(["agent workflow", "openai.chat", "run tool"])
    expect(page.locator("#tree-cut")).to_contain_text("Showing the first 3 of 5 spans")
    expect(tree).not_to_contain_text("What is 2+2?")  # no message bodies until opened

    call = tree.locator('details.span[data-span-id="0000000000000002"]')
    call.locator("> details.span-more > summary").click()
    body = call.locator("> details.span-more > .span-body")
    expect(body).to_contain_text("What is 2+2?")
    expect(body).to_contain_text("Four.")
    expect(body).to_contain_text("gen_ai.request.temperature")
    expect(page).to_have_url(f"{page.url.split('/traces/')[0]}/traces/sessions/{session.pk}/")

    tree.locator("#span-next a").click()
    expect(names).to_have_text(
        ["agent workflow", "openai.chat", "run tool", "late tool", "second workflow"]
    )
    expect(tree.locator("#span-next")).to_have_count(0)  # the last page
    # The later page's child of an earlier span names its parent.
    expect(tree.locator("summary", has_text="late tool")).to_contain_text("in agent workflow")
    # Its bars share the first page's timeline: the second workflow starts at 75 % of 400 ms.
    lanes = page.evaluate(
        """() => [...document.querySelectorAll('#span-tree .waterfall')].map((lane) => {
          const l = lane.getBoundingClientRect(), b = lane.querySelector('.bar').getBoundingClientRect();
          return (b.left - l.left) / l.width;
        })"""
    )
    assert lanes[-1] == pytest.approx(0.75, abs=0.01)
