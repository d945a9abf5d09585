"""Environment generation's call to a user's base (harnesses.model_client) reads the answer
as it arrives: an answer of 100 MB with no length fails the call (the worker's memory
bounded), a base dripping a byte a second ends at the call's deadline, not past it.

Talks only to 127.0.0.1 (a local hostile base, through the pinned client)."""

import threading
import time
import tracemalloc

import pytest

from belvedir import pinned
from harnesses import model_client
from harnesses.model_client import ModelError, chat
from tests.helpers.hostile_base import HostileBase

MB = 2**20


@pytest.fixture
def allowed(settings):
    """The policy as production applies it, the local base allow-listed."""
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]


def _chat(base: str, seconds: float) -> str:
    with pinned.sync_client(timeout=30) as client:
        return chat(
            api_base=base,
            api_key="sk-user-0123456789",
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            deadline=time.monotonic() + seconds,
            retries=0,
            client=client,
        )


def _bounded(function, seconds: float):
    """`function()`'s outcome (its value or its error), failing the test past `seconds`."""
    outcome = {}

    def call():
        try:
            outcome["value"] = function()
        except Exception as exc:  # noqa: BLE001 (handed to the test)
            outcome["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the call was still going after {seconds} s"
    return outcome


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_of_100_mb_without_a_length_fails_with_the_workers_memory_bounded(
    allowed, monkeypatch, status
):
    monkeypatch.setattr(model_client, "MAX_ANSWER_BYTES", MB, raising=False)
    with HostileBase(total=100 * MB, status=status) as base:
        tracemalloc.start()
        try:
            outcome = _bounded(lambda: _chat(base.base_url, 60), 60)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert isinstance(outcome.get("error"), ModelError), outcome
    limit = "1 MiB" if status == 200 else "64 KiB"
    assert str(outcome["error"]).endswith(f"answered over {limit}."), outcome
    assert peak < 20 * MB, f"the worker held {peak // MB} MiB"


def test_a_base_dripping_a_byte_a_second_ends_at_the_calls_deadline(allowed):
    with HostileBase(total=60, chunk=1, pause=1.0) as base:
        started = time.monotonic()
        outcome = _bounded(lambda: _chat(base.base_url, 3), 15)
        took = time.monotonic() - started

    assert isinstance(outcome.get("error"), ModelError), outcome
    assert "did not answer in time" in str(outcome["error"])
    assert took < 6
