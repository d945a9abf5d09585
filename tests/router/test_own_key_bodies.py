"""A user's base (an own-key call) may answer anything, as slowly as it likes, and the router
is one process serving every run: a whole answer or an error answer past what the router
reads is a 502 naming the limit, not the router's memory; a stream with no line end is
relayed with the router's memory flat; a base dripping its answer ends at the call's
deadline; and of an error that is not OpenAI-style nothing of its body is shown.

Served by uvicorn on 127.0.0.1; the user's base is a local hostile server."""

import time
from pathlib import Path

import httpx
import pytest

from tests.helpers.hostile_base import HostileBase
from tests.router.helpers import MODEL
from tests.router.test_own_key_calls import QUESTION, _own_key_run

pytestmark = pytest.mark.django_db(transaction=True)

MB = 2**20


def _peak_rss(process) -> int:
    """The router process's peak resident memory so far, in bytes (Linux's VmHWM)."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def router(serve_router):
    """The router (its URL and process) with small limits: answers of 1 MiB, errors of
    64 KiB, calls of 3 s."""
    url = serve_router(
        BELVEDIR_ROUTER_MAX_ANSWER_BYTES=str(MB),
        BELVEDIR_ROUTER_MAX_ERROR_BYTES=str(64 * 2**10),
        BELVEDIR_ROUTER_CALL_DEADLINE="3",
    )
    return url, serve_router.processes[-1]


def _post(url, run, body, timeout=20):
    headers = {"Authorization": f"Bearer {run.plain_key}"}
    return httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=timeout)


def _warm(url, owner, harness) -> None:
    """One call first (a run of its own), so the router's imports and pools count before the
    measure."""
    with HostileBase(total=10, status=500) as small:
        _post(
            url,
            _own_key_run(owner, harness, small.base_url),
            {"model": MODEL, "messages": QUESTION},
        )


@pytest.mark.parametrize("status, limit", [(200, "1 MiB"), (500, "64 KiB")])
def test_an_answer_of_100_mb_without_a_length_is_a_502_naming_the_limit_not_memory(
    owner, harness, covered_model, router, status, limit
):
    url, process = router
    _warm(url, owner, harness)
    before = _peak_rss(process)
    with HostileBase(total=100 * MB, status=status) as base:
        run = _own_key_run(owner, harness, base.base_url)
        answer = _post(url, run, {"model": MODEL, "messages": QUESTION})
        grown = _peak_rss(process) - before

    assert answer.status_code == 502, answer.text
    error = answer.json()["error"]
    assert error["code"] == "answer_too_large", error
    assert limit in error["message"]
    assert grown < 40 * MB, f"the router grew by {grown // MB} MiB"
    assert base.sent < 100 * MB  # it stopped reading


def test_a_stream_of_100_mb_with_no_line_end_is_relayed_with_the_routers_memory_flat(
    owner, harness, covered_model, router
):
    url, process = router
    _warm(url, owner, harness)
    before, received, started = _peak_rss(process), 0, time.monotonic()
    with HostileBase(total=100 * MB, fill=b"data: x", content_type="text/event-stream") as base:
        run = _own_key_run(owner, harness, base.base_url)
        body = {"model": MODEL, "messages": QUESTION, "stream": True}
        headers = {"Authorization": f"Bearer {run.plain_key}"}
        with httpx.stream(
            "POST", f"{url}/chat/completions", json=body, headers=headers, timeout=20
        ) as streamed:
            assert streamed.status_code == 200
            for chunk in streamed.iter_raw():
                received += len(chunk)
                assert time.monotonic() - started < 60, "the relay is too slow"
        grown = _peak_rss(process) - before

    assert received >= 100 * MB
    assert grown < 40 * MB, f"the router grew by {grown // MB} MiB"


def test_a_base_dripping_a_byte_a_second_ends_at_the_calls_deadline(
    owner, harness, covered_model, router
):
    url, _ = router
    with HostileBase(total=60, chunk=1, pause=1.0) as base:
        run = _own_key_run(owner, harness, base.base_url)
        started = time.monotonic()
        answer = _post(url, run, {"model": MODEL, "messages": QUESTION}, timeout=15)
        took = time.monotonic() - started

    assert answer.status_code == 504, answer.text
    assert answer.json()["error"]["code"] == "timeout"
    assert 2.5 < took < 8


def test_an_error_that_is_not_openai_style_shows_nothing_of_its_body(
    owner, harness, covered_model, router
):
    url, _ = router
    page = b"<html>Internal Server Error at 10.0.0.3: the metadata token abc123</html>"
    with HostileBase(total=len(page), status=500, fill=page, content_type="text/html") as base:
        run = _own_key_run(owner, harness, base.base_url)
        answer = _post(url, run, {"model": MODEL, "messages": QUESTION})

    assert answer.status_code == 500
    assert answer.json()["error"]["message"] == "The upstream answered 500."
    assert "10.0.0.3" not in answer.text and "abc123" not in answer.text
