"""POST /api/v1/traces under the ASGI server production runs (uvicorn, `make up`).

belvedir.asgi sends it to its own handler (`IngestHandler`), which runs the view in long-lived
threads: under Django's ASGI handler each request ran in a thread of its own and opened a
PostgreSQL connection that died with it (bench/ingest.py `--server uvicorn`: about 40-50
backends started in a 600-batch run). The answers are the full stack's.
"""

import http.client
import json

import pytest
from django.db import connection, connections
from django.test import RequestFactory

from belvedir import asgi
from tests.router.helpers import serving_app
from tests.traces.helpers import JSON, TRACES, body_of, llm_attributes, span

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 64 * 1024


@pytest.fixture
def asgi_url(tmp_path):
    with serving_app(tmp_path, BELVEDIR_INGEST_MAX_BYTES=str(LIMIT)) as url:
        yield url


def send(url: str, method: str, body: bytes = b"", **headers: str):
    """(status, content type, body) of one request on a new connection."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, TRACES, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()


def post(url: str, key: str | None, body: bytes, content_type: str = JSON):
    headers = {"Content-Type": content_type}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return send(url, "POST", body, **headers)


def server_backends() -> set[int]:
    """The PostgreSQL backends on the test database other than this test's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {row[0] for row in cursor.fetchall()}


def test_batches_are_stored_through_one_kept_connection(owner, asgi_url):
    from traces.models import Session, Span

    before = server_backends()
    seen = []
    for n in range(4):
        spans = [span(f"call-{n}-{i}", attributes=llm_attributes("asgi-session")) for i in (1, 2)]
        status, content_type, body = post(asgi_url, owner.key, json.dumps(body_of(*spans)).encode())
        assert (status, content_type, json.loads(body)) == (200, JSON, {})
        seen.append(server_backends() - before)
    assert Span.objects.count() == 8
    assert Session.objects.get(external_id="asgi-session").span_count == 8
    # The four batches, one after another, were stored through the web process's pooled
    # connections (the first, and one more it may open while the first request waits for it);
    # a thread per request started a backend for each, gone when it ended.
    assert 1 <= len(seen[0]) <= 2
    assert seen == [seen[0]] * 4


def test_refusals_are_answered_as_by_the_full_stack(owner, asgi_url):
    from traces.models import Span

    batch = json.dumps(body_of(span("one"))).encode()
    status, content_type, body = post(asgi_url, None, batch)
    assert (status, content_type) == (401, JSON)
    assert "API key" in json.loads(body)["message"]
    status, _, _ = post(asgi_url, "bk_not_a_key", batch)
    assert status == 401
    status, _, _ = send(asgi_url, "GET", Authorization=f"Bearer {owner.key}")
    assert status == 405
    status, _, _ = post(asgi_url, owner.key, batch, content_type="text/plain")
    assert status == 415
    status, content_type, body = post(asgi_url, owner.key, b"x" * (LIMIT + 1))
    assert (status, content_type) == (413, JSON)
    assert str(LIMIT) in json.loads(body)["message"]
    status, content_type, _ = post(asgi_url, owner.key, b"{not json")
    assert (status, content_type) == (400, JSON)
    assert Span.objects.count() == 0


def test_an_unexpected_error_in_the_pool_thread_answers_json_500(owner, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("traces.ingest_views.spans_ingest", broken)
    request = RequestFactory().post(
        TRACES,
        data=json.dumps(body_of(span("one"))),
        content_type=JSON,
        HTTP_AUTHORIZATION=f"Bearer {owner.key}",
    )

    def serve():
        try:
            return asgi._serve_in_thread(request)
        finally:
            connections.close_all()  # the pool thread's connection, before the teardown

    response = asgi.ingest_pool().submit(serve).result(timeout=30)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert "Server error" in json.loads(response.content)["detail"]


def test_the_pool_has_a_thread_past_the_views_concurrency_for_its_503(settings):
    # The request past BELVEDIR_INGEST_CONCURRENCY must reach the view (which answers 503)
    # instead of waiting in the pool's queue.
    assert asgi.ingest_pool()._max_workers == settings.BELVEDIR_INGEST_CONCURRENCY + 1
