"""The platform's one chat call (harnesses.model_client): retries 429/5xx with backoff, and
says clearly when the model cannot be reached, refuses, or runs out of time."""

import socket
import time

import pytest

from harnesses.model_client import ModelError, chat
from tests.helpers.scripted_model import ScriptedModel

MESSAGES = [{"role": "user", "content": "hi"}]


class FlakyModel(ScriptedModel):
    """Answers its first `failures` requests with a 503, then its script."""

    def __init__(self, failures: int):
        self.failures = failures
        super().__init__(["fine"])

    @property
    def fail(self):  # read after the request is recorded, so steady within one request
        return (503, b"overloaded") if len(self.requests) <= self.failures else None

    @fail.setter
    def fail(self, value) -> None:
        pass


def call(base: str, **kwargs) -> str:
    return chat(
        api_base=base,
        api_key="sk-test",
        model="m",
        messages=MESSAGES,
        deadline=time.monotonic() + 30,
        backoff=0,
        **kwargs,
    )


def test_the_answer_text_comes_back():
    with ScriptedModel(["hello there"]) as model:
        assert call(model.base_url) == "hello there"
    assert model.requests[0]["messages"] == MESSAGES


def test_a_busy_model_is_retried_until_it_answers():
    with FlakyModel(failures=2) as model:
        assert call(model.base_url, retries=2) == "fine"
    assert len(model.requests) == 3


@pytest.mark.parametrize("status", [429, 500, 503])
def test_429_and_5xx_are_retried_then_named(status):
    with ScriptedModel(["x"]) as model:
        model.fail = (status, b'{"error": {"message": "busy"}}')
        with pytest.raises(ModelError) as caught:
            call(model.base_url, retries=2)
    assert len(model.requests) == 3
    assert str(caught.value) == f"The model at {model.base_url} answered {status}: busy"


def test_a_client_error_is_not_retried():
    with ScriptedModel(["x"]) as model:
        model.fail = (400, b'{"error": {"message": "bad request"}}')
        with pytest.raises(ModelError):
            call(model.base_url, retries=2)
    assert len(model.requests) == 1


def test_an_unreachable_model_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ModelError) as caught:
        call(f"http://127.0.0.1:{port}/v1", retries=1)
    assert f"Could not reach the model at http://127.0.0.1:{port}/v1" in str(caught.value)


def test_a_model_slower_than_the_deadline_runs_out_of_time():
    with ScriptedModel(["late"], delay=3) as model:
        model.server.handle_error = lambda *args: None  # its late answer meets a closed socket
        with pytest.raises(ModelError) as caught:
            chat(
                api_base=model.base_url,
                api_key="",
                model="m",
                messages=MESSAGES,
                deadline=time.monotonic() + 1.5,
                backoff=0,
            )
    assert "did not answer in time" in str(caught.value)
