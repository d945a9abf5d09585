"""An environment generation with the user's own base is a call from the platform's side (a
worker) to wherever the user's name points: the model-host policy applies at the request, at
the job and on every connection, which goes to the address just checked, the name resolved
once (no DNS rebinding between the check and the connection); no redirect is followed, and
of an error answer only an OpenAI-style error's message is shown.

These tests talk only to 127.0.0.1: the DNS answers come from a hook on socket.getaddrinfo
(a guard refuses any connection to the public address it answers at first), the target is a
local server."""

import json
import socket

import httpcore
import pytest

from belvedir import pinned
from harnesses import generation
from tests.harnesses.test_environment_generation import KEY, TASKS, run_job, start
from tests.helpers.resolvers import answers
from tests.helpers.scripted_model import ScriptedModel

NAME = "models.rebinding.test"
PUBLIC = "93.184.216.34"  # what the name answers while it is checked; never connected to


@pytest.fixture
def production(settings):
    """The policy as production applies it (BELVEDIR_DEV=0, nothing allow-listed)."""
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_MODEL_HOST_ALLOWLIST = []
    return settings


@pytest.fixture
def dns(monkeypatch) -> dict:
    """NAME resolves to `dns["answer"]` (PUBLIC at first); every other name as the system
    answers it. A connection to PUBLIC, by address or by NAME while it answers PUBLIC, fails
    here before it is made."""
    state = {"answer": PUBLIC}
    real_lookup, real_connect = socket.getaddrinfo, socket.create_connection

    def getaddrinfo(host, port, *args, **kwargs):
        if host != NAME:
            return real_lookup(host, port, *args, **kwargs)
        address = (state["answer"], int(port or 0))
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)]

    def create_connection(address, *args, **kwargs):
        host = address[0]
        if host == PUBLIC or (host == NAME and state["answer"] == PUBLIC):
            raise OSError("the test's guard: no connection to a public address")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    return state


def test_a_base_rebound_to_loopback_after_its_checks_is_never_connected_to(
    owner, production, dns, monkeypatch
):
    """The attack: the name answers a public address to the request's check and to the job's,
    then 127.0.0.1 (the platform's own network) when the job connects."""
    with ScriptedModel([json.dumps(TASKS)]) as model:
        base = f"http://{NAME}:{model.server.server_address[1]}/v1"
        started = start(owner, model, model_api_base=base)
        assert started.status_code == 202, started.json()
        checked = generation.model_base_refusal

        def check_then_rebind(url, **kwargs):
            refusal = checked(url, **kwargs)
            dns["answer"] = "127.0.0.1"  # from now on the name points at the platform
            return refusal

        monkeypatch.setattr(generation, "model_base_refusal", check_then_rebind)
        done = run_job(started.json()["id"])
        assert model.requests == []  # nothing reached 127.0.0.1
    assert done.status == "failed"
    assert f"The model base {base} is refused" in done.error, done.error
    assert "loopback address" in done.error


def test_a_redirect_to_an_internal_address_is_not_followed(owner, production, dns):
    production.BELVEDIR_MODEL_HOST_ALLOWLIST = [NAME]  # the base's host, by its name
    dns["answer"] = "127.0.0.1"
    with ScriptedModel(["[]"]) as elsewhere, ScriptedModel([json.dumps(TASKS)]) as model:
        model.fail = (307, b"")
        model.fail_headers = {"Location": f"{elsewhere.base_url}/chat/completions"}
        base = f"http://{NAME}:{model.server.server_address[1]}/v1"
        done = run_job(start(owner, model, model_api_base=base).json()["id"])
    assert len(model.requests) == 1 and elsewhere.requests == []
    assert done.status == "failed"
    assert done.error.endswith("answered 307, a redirect, which is not followed."), done.error


@pytest.mark.parametrize(
    "content, shown",
    [
        (b"<html>root:x:0:0 the metadata service's page</html>", "answered 400."),
        (b'{"detail": "an internal token abc123"}', "answered 400."),
        (json.dumps({"error": {"message": f"bad key {KEY}"}}).encode(), "400: bad key [redacted]"),
    ],
)
def test_an_error_answer_is_shown_only_as_an_openai_style_errors_message(owner, content, shown):
    with ScriptedModel(["[]"]) as model:
        model.fail = (400, content)
        done = run_job(start(owner, model).json()["id"])
    assert done.status == "failed"
    assert done.error.endswith(shown), done.error
    assert KEY not in done.error


class Recording(httpcore.NetworkBackend):
    """The real network, recording every address the client asked to connect to."""

    def __init__(self):
        self.inner, self.connected = httpcore.SyncBackend(), []

    def connect_tcp(self, host, port, **kwargs):
        self.connected.append((host, port))
        return self.inner.connect_tcp(host, port, **kwargs)

    def sleep(self, seconds):
        self.inner.sleep(seconds)


def test_the_sync_client_resolves_once_and_connects_to_the_checked_address_by_its_name(
    production,
):
    production.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]
    with ScriptedModel(["fine"]) as model:
        port = model.server.server_address[1]
        # 127.0.0.1 once, then an address nothing listens on: a second lookup would send the
        # call elsewhere.
        resolver, network = answers("127.0.0.1", "10.0.0.7"), Recording()
        with pinned.sync_client(timeout=10, resolver=resolver, inner=network) as client:
            answer = client.post(
                f"http://models.example:{port}/v1/chat/completions", json={"messages": []}
            )
    assert answer.status_code == 200
    assert resolver.asked == ["models.example"]
    assert network.connected == [("127.0.0.1", port)]
    assert model.seen[0]["host"] == f"models.example:{port}"


def test_the_sync_client_refuses_an_internal_answer_without_connecting(production):
    resolver, network = answers("10.0.0.7"), Recording()
    with pinned.sync_client(timeout=10, resolver=resolver, inner=network) as client:
        with pytest.raises(pinned.BaseRefused, match="10.0.0.7.*private"):
            client.post("http://models.example:9/v1/chat/completions", json={})
    assert network.connected == []
    with pytest.raises(pinned.BaseRefused):
        pinned.SyncPinnedBackend().connect_unix_socket("/var/run/docker.sock")
