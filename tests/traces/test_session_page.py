"""The session page: a compact span tree a page at a time (keyset "Load more"), each span's
messages, attributes and events loaded when it is opened (htmx), or as a page of its own."""

import html as html_lib
import re

import pytest

from tests.traces.helpers import body_of, llm_attributes, new_trace_id, post_traces, span
from traces import selectors
from traces.models import Session, Span, TaskGroup

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def html_of(response, status: int = 200) -> str:
    assert response.status_code == status, response.status_code
    return response.content.decode()


def tree_of(html: str) -> str:
    return html[html.index('id="span-tree"') :]


def names_in(html: str) -> list[str]:
    return re.findall(r'<summary>\s*<span class="span-label">\s*<strong>([^<]+)</strong>', html)


def next_link(html: str) -> tuple[str, str]:
    """The "Load more" link: (its plain href, its hx-get), unescaped."""
    match = re.search(
        r'<p class="span-next" id="span-next"><a href="([^"]+)" hx-get="([^"]+)"', html
    )
    assert match, "no Load more link"
    return html_lib.unescape(match[1]), html_lib.unescape(match[2])


def span_urls(html: str) -> list[str]:
    return re.findall(r'<details class="span-more" hx-get="([^"]+)"', html)


def test_the_tree_shows_each_span_compactly_without_its_message_bodies(owner, capture):
    html = html_of(owner.web.get(f"/traces/sessions/{capture.pk}/"))

    assert "run_capture_1" in html and 'id="session-outcome">success<' in html
    assert 'id="llm-call-count">4<' in html
    # The tree: each workflow, then its children (by start time), deeper in.
    tree = tree_of(html)
    assert names_in(tree) == [
        "answer the question.workflow",
        "openai.chat",
        "openai.chat",
        "raw http.workflow",
        "chat meta-llama/llama-3-8b",
        "POST",
        "chat qwen/qwen3",
        "failing task.workflow",
    ]
    depths = re.findall(r'<details class="span" open data-span-id="\w+" data-depth="(\d)"', tree)
    assert depths == ["0", "1", "1", "0", "1", "1", "1", "0"]
    # An LLM call: model, tokens and duration; an error with its message.
    assert "LLM · gpt-4o-mini-2024" in tree
    assert "20 in / 1 out tokens" in tree
    assert "17.9 ms" in tree
    assert ">error<" in tree and "boom" in tree
    # No message bodies: each span's details load from its own URL when opened.
    assert "Be brief." not in tree and "2+2?" not in tree and "raw requests" not in tree
    pks = Span.objects.filter(session=capture).values_list("pk", flat=True)
    assert sorted(span_urls(tree)) == sorted(
        f"/traces/sessions/{capture.pk}/spans/{pk}/" for pk in pks
    )
    assert 'hx-trigger="toggle once"' in tree and "Open the span</a>" in tree
    assert tree.count("Messages and details") == 4  # the LLM calls
    assert 'id="span-next"' not in tree and 'id="tree-cut"' not in html  # one page holds all
    # Its tasks, linked to their groups.
    assert "answer the question" in html and "failing task" in html
    group = TaskGroup.objects.get(normalized_name="answer the question")
    assert f'href="/traces/task-groups/{group.pk}/"' in html


def test_opening_a_span_loads_its_messages_attributes_and_status(owner, capture):
    call = Span.objects.get(session=capture, name="openai.chat", input_tokens=20)
    url = f"/traces/sessions/{capture.pk}/spans/{call.pk}/"

    fragment = html_of(owner.web.get(url, **HX))

    assert fragment.lstrip().startswith('<div class="span-detail"') and "<html" not in fragment
    assert "Be brief." in fragment and "2+2?" in fragment  # its input and output messages
    assert "gen_ai.request.model" in fragment and call.span_id in fragment  # attributes, ids
    failed = Span.objects.get(session=capture, status_code="error")
    assert "boom" in html_of(
        owner.web.get(f"/traces/sessions/{capture.pk}/spans/{failed.pk}/", **HX)
    )
    # Without htmx (the link inside the span): a page of its own, back to the session.
    page = html_of(owner.web.get(url))
    assert "<html" in page and "Be brief." in page
    assert f'href="/traces/sessions/{capture.pk}/"' in page


def test_message_content_is_escaped(owner):
    attributes = llm_attributes("xss") | {
        "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "<script>alert(1)</script>"}]}]'
    }
    post_traces(owner.key, body_of(span("openai.chat <b>", attributes=attributes)))
    session = Session.objects.get(external_id="xss")
    call = Span.objects.get(session=session)

    tree = tree_of(html_of(owner.web.get(f"/traces/sessions/{session.pk}/")))
    fragment = html_of(owner.web.get(f"/traces/sessions/{session.pk}/spans/{call.pk}/", **HX))

    assert "openai.chat <b>" not in tree and "openai.chat &lt;b&gt;" in tree
    assert "<script>alert(1)</script>" not in fragment and "&lt;script&gt;alert(1)" in fragment


def test_a_span_is_only_reached_through_its_own_session_and_organization(
    client, owner, readonly, outsider, capture, foreign
):
    mine = Span.objects.filter(session=capture).first()
    theirs = Span.objects.get(session=foreign)

    assert owner.web.get(f"/traces/sessions/{foreign.pk}/spans/{theirs.pk}/").status_code == 404
    assert owner.web.get(f"/traces/sessions/{capture.pk}/spans/{theirs.pk}/").status_code == 404
    assert outsider.web.get(f"/traces/sessions/{capture.pk}/spans/{mine.pk}/").status_code == 404
    assert outsider.web.get(f"/traces/sessions/{foreign.pk}/spans/{mine.pk}/").status_code == 404
    assert owner.web.get(f"/traces/sessions/{capture.pk}/spans/{mine.pk}/").status_code == 200
    assert readonly.web.get(f"/traces/sessions/{capture.pk}/spans/{mine.pk}/").status_code == 200
    assert client.get(f"/traces/sessions/{capture.pk}/spans/{mine.pk}/").status_code == 302


@pytest.fixture
def big(owner, monkeypatch) -> Session:
    """30 spans, two by two at the same start time (steps 9 and 10 tie across the first
    page's end: a keyset page must neither repeat nor skip one of them), pages of 10; steps 1,
    10 and 25 are children of step 0 (25 on the last page)."""
    monkeypatch.setattr(selectors, "SPAN_PAGE", 10)
    trace, root = new_trace_id(), "00000000000000aa"
    spans = [
        span(
            f"step {i}",
            trace_id=trace,
            span_id=root if i == 0 else None,
            parent=root if i in (1, 10, 25) else None,
            attributes={"session.id": "big"},
            start=(i + 1) // 2,
        )
        for i in range(30)
    ]
    assert post_traces(owner.key, body_of(*reversed(spans))).status_code == 200
    return Session.objects.get(external_id="big")


def test_a_large_session_loads_its_spans_a_page_at_a_time(owner, big):
    first = html_of(owner.web.get(f"/traces/sessions/{big.pk}/"))
    assert "Showing the first 10 of 30 spans" in first
    shown = names_in(tree_of(first))
    # The page's spans as a tree: step 1 under step 0 (step 10 and 25 are on later pages).
    assert shown[:2] == ["step 0", "step 1"] and len(shown) == 10
    plain, hx = next_link(first)
    assert "fragment=spans" in hx and "fragment" not in plain

    pages, fragments = [shown], []
    while True:
        fragment = html_of(owner.web.get(hx, **HX))
        assert "<html" not in fragment and "<h2>Tasks</h2>" not in fragment
        pages.append(names_in(fragment))
        fragments.append(fragment)
        if 'id="span-next"' not in fragment:
            break
        plain, hx = next_link(fragment)
        assert len(pages) < 5
    # Every span exactly once, each page the next ten in start order (ties by id).
    pk = dict(Span.objects.filter(session=big).values_list("name", "pk"))
    order = [f"step {i}" for i in sorted(range(30), key=lambda i: ((i + 1) // 2, pk[f"step {i}"]))]
    assert [sorted(page) for page in pages] == [sorted(order[k : k + 10]) for k in (0, 10, 20)]
    # A span whose parent an earlier page showed names it.
    assert '<strong>step 25</strong> <span class="muted">in step 0</span>' in fragments[1]
    assert "in step 0" not in first


def test_the_plain_load_more_link_is_a_whole_page_and_a_bad_cursor_the_first_page(owner, big):
    plain, _ = next_link(html_of(owner.web.get(f"/traces/sessions/{big.pk}/")))

    second = html_of(owner.web.get(plain))

    assert "<html" in second and "Spans 11–20 of 30" in second
    assert "step 0" not in names_in(tree_of(second)) and len(names_in(tree_of(second))) == 10
    assert f'<a href="/traces/sessions/{big.pk}/">back to the first</a>' in second
    for cursor in ("nonsense", "12-", "-3", "9" * 30 + "-1", "9" * 18 + "-1"):
        page = html_of(owner.web.get(f"/traces/sessions/{big.pk}/?after={cursor}&shown=10"))
        assert names_in(tree_of(page))[:2] == ["step 0", "step 1"], cursor
        assert "Showing the first 10 of 30 spans" in page
    # `shown` only numbers the spans of a later page; one that is not a count is ignored.
    for shown in ("lots", "9" * 5000):
        page = html_of(owner.web.get(f"{plain.split('&')[0]}&shown={shown}"))
        assert "Spans 1–10 of 30" in page


def test_the_api_serves_a_large_session_in_pages(owner, big):
    first = owner.api.get(f"/api/v1/sessions/{big.pk}?span_limit=10").json()
    rest = owner.api.get(f"/api/v1/sessions/{big.pk}?span_limit=100&span_offset=10").json()
    assert first["spans_total"] == 30 and len(first["spans"]) == 10 and len(rest["spans"]) == 20
    names = [s["name"] for s in first["spans"] + rest["spans"]]
    assert sorted(names) == sorted(f"step {i}" for i in range(30)) and len(set(names)) == 30
    bad = owner.api.get(f"/api/v1/sessions/{big.pk}?span_limit=lots")
    assert bad.status_code == 400 and "span_limit" in bad.json()
