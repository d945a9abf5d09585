"""`make up`'s web server (scripts/serve.sh: uvicorn on the ASGI app) streams router calls and
serves the pages with their static files (DEBUG on, as `make up` runs it)."""

import re

import openai
import pytest
import requests

from belvedir.settings import BASE_DIR
from runs.models import Run
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import MODEL, ROOT, free_port, settled, start_uvicorn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def served(transactional_db, upstream, tmp_path):
    """scripts/serve.sh on this test's database with DEBUG on; its base URL."""
    from django.db import connection

    port = free_port()
    process = start_uvicorn(
        upstream_base=upstream.base_url,
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / "serve.log",
        command=["bash", str(ROOT / "scripts" / "serve.sh")],
        DEBUG="1",
        UVICORN_LOG_LEVEL="warning",
    )
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=20)


def test_the_up_server_streams_a_router_call_and_settles_it(covered_run, served, upstream):
    client = openai.OpenAI(base_url=f"{served}/api/v1", api_key=covered_run.plain_key)

    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)

    assert text == "w0 w1 w2 w3 w4"
    assert upstream.requests[0]["stream_options"] == {"include_usage": True}
    run = settled(Run.objects.get(pk=covered_run.pk), spans=1)
    assert run.covered_spent_micros == PROMPT_TOKENS + 5 * 2


def test_the_up_server_serves_the_pages_static_files(served):
    page = requests.get(f"{served}/login/", timeout=10)
    assert page.status_code == 200
    links = re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text)
    assert {"/static/belvedir.css", "/static/belvedir.js"} <= {link.split("?")[0] for link in links}
    for link in links:
        asset = requests.get(f"{served}{link}", timeout=10)
        assert asset.status_code == 200, link
        source = BASE_DIR / "belvedir" / "static" / link.removeprefix("/static/").split("?")[0]
        if source.exists():
            assert asset.content == source.read_bytes(), link
    css = requests.get(f"{served}/static/belvedir.css", timeout=10)
    assert css.headers["Content-Type"].startswith("text/css")
