"""Served by WSGI (runserver, the test client): a non-streamed call still works and is settled
before its answer; a streamed one is refused, naming the ASGI server it needs."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from runs.models import Run
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import MODEL
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = [{"role": "user", "content": "hi"}]


def _post(client, key: str, **body):
    # In a thread of its own: Playwright's sync API (the browser tests, earlier in the same
    # session) leaves an event loop in the main thread, where a WSGI request's async_to_sync
    # refuses to run. A real WSGI server has no loop in its request threads either.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(
            client.post,
            "/api/v1/chat/completions",
            data=json.dumps({"model": MODEL, "messages": MESSAGES, **body}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        ).result()


def test_under_wsgi_a_call_is_answered_and_settled_before_the_answer(client, covered_run, upstream):
    response = _post(client, covered_run.plain_key)

    assert response.status_code == 200, response.content
    assert response.json()["choices"][0]["message"]["content"] == "w0 w1 w2 w3 w4"
    run = Run.objects.get(pk=covered_run.pk)
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (PROMPT_TOKENS + 10, 0)
    assert Span.objects.filter(run=run, status_code="ok").count() == 1


def test_under_wsgi_a_streamed_call_is_refused_with_501_naming_the_asgi_server(
    client, covered_run, upstream
):
    response = _post(client, covered_run.plain_key, stream=True)

    assert response.status_code == 501
    assert response.json()["error"]["code"] == "streaming_needs_asgi"
    assert upstream.requests == []
