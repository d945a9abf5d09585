"""The model base a user names is an SSRF vector once the router forwards to it: the
repo-host policy applies (loopback, private, link-local, CGNAT and the platform's own host
refused) at launch and again on every connection the router opens, the name resolved once
and the connection made to the checked address (no DNS rebinding), no redirect followed.

These tests connect only to 127.0.0.1: a refused address is asserted on by the policy and by
the connections the router tried (none), never by reaching it."""

import httpcore
import pytest

from belvedir.errors import Invalid
from belvedir.net_policy import HostUnresolved, model_base_refusal
from router import pinned
from runs import services as run_services
from tests.helpers.aio import run as run_async
from tests.helpers.resolvers import answers
from tests.router.fake_upstream import FakeUpstream

KEY = "sk-user-own-key-0123456789"
REFUSED_BASES = {
    "http://127.0.0.1:9/v1": "loopback",
    "http://[::1]:9/v1": "loopback",
    "http://10.1.2.3/v1": "private",
    "http://192.168.1.1/v1": "private",
    "http://169.254.169.254/latest": "link-local",
    "http://100.64.0.7/v1": "carrier-grade NAT",
    "http://[::ffff:10.0.0.1]/v1": "private",
    "http://[2002:7f00:1::]/v1": "loopback",  # 6to4 of 127.0.0.1
    "http://[2002:a9fe:a9fe::1]/v1": "link-local",  # 6to4 of 169.254.169.254
    "http://0.0.0.0:8000/v1": "unspecified",
    "https://localhost/v1": "loopback",
}


@pytest.fixture
def production(settings):
    """The policy as production applies it (BELVEDIR_DEV=0, nothing allow-listed)."""
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_MODEL_HOST_ALLOWLIST = []
    return settings


def test_internal_model_bases_are_refused_and_say_what_kind(production):
    for base, kind in REFUSED_BASES.items():
        refusal = model_base_refusal(base)
        assert refusal is not None and kind in refusal, (base, refusal)


def test_the_platforms_own_host_is_refused_by_name_and_by_address(production):
    production.BELVEDIR_BASE_URL = "https://platform.example"
    answers = {"platform.example": ["8.8.4.4"], "alias.example": ["8.8.4.4"]}

    def resolver(host, port):
        import ipaddress

        if host not in answers:
            raise HostUnresolved(host)
        return [ipaddress.ip_address(a) for a in answers[host]]

    for base in ("https://platform.example/api/v1", "https://alias.example/v1"):
        assert "this platform itself" in model_base_refusal(base, resolver=resolver)
    # The same address on another port is another service: the public-address rule applies.
    assert model_base_refusal("https://alias.example:8443/v1", resolver=resolver) is None


def test_a_name_that_does_not_resolve_and_a_base_without_a_host_are_refused(production):
    assert "does not resolve" in model_base_refusal("https://no-such-host.invalid/v1")
    assert "http(s) URL" in model_base_refusal("ftp://example.com/v1")


def test_an_allow_listed_host_or_network_passes_and_dev_mode_turns_the_policy_off(production):
    production.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.0/8", "models.internal"]
    assert model_base_refusal("http://127.0.0.1:9/v1") is None
    assert model_base_refusal("http://10.1.2.3/v1") is not None
    production.BELVEDIR_DEV = True
    assert model_base_refusal("http://10.1.2.3/v1") is None


def test_a_launch_with_an_own_key_to_an_internal_base_is_refused_naming_the_field(
    production, owner, harness
):
    internal, public = "http://169.254.169.254/v1", "https://8.8.8.8/v1"
    for field, bases in (("model", (internal, public)), ("judge", (public, internal))):
        with pytest.raises(Invalid) as refused:
            run_services.run_launch(
                project=owner.project,
                harness=harness,
                model="acme/model",
                model_api_key=KEY,
                model_api_base=bases[0],
                judge_model="acme/judge",
                judge_api_key=KEY,
                judge_api_base=bases[1],
            )
        assert refused.value.field == f"{field}_api_base"
        assert refused.value.code == "model_base_refused"
        assert "link-local" in refused.value.message and KEY not in refused.value.message


def test_with_the_proxy_off_the_sandbox_calls_its_base_itself_and_the_launch_is_not_refused(
    production, owner, harness
):
    from runs.model_access import model_access_check

    access = model_access_check(
        project=owner.project,
        gpu=False,
        harness_env={"BELVEDIR_MODEL_PROXY": "off"},
        model="acme/model",
        model_api_base="http://10.1.2.3/v1",
        model_api_key=KEY,
        judge_model="",
        judge_api_base="",
        judge_api_key="",
    )
    assert access.model.api_base == "http://10.1.2.3/v1" and not access.model.proxied

    with pytest.raises(Invalid) as refused:
        model_access_check(
            project=owner.project,
            gpu=False,
            harness_env={"BELVEDIR_MODEL_PROXY": "no"},
            model="acme/model",
            model_api_base="",
            model_api_key=KEY,
            judge_model="",
            judge_api_base="",
            judge_api_key="",
        )
    assert refused.value.message == "BELVEDIR_MODEL_PROXY must be on or off."


class Recording(httpcore.AsyncNetworkBackend):
    """The real network, recording every address the router asked to connect to."""

    def __init__(self):
        self.inner, self.connected = httpcore.AnyIOBackend(), []

    async def connect_tcp(self, host, port, **kwargs):
        self.connected.append((host, port))
        return await self.inner.connect_tcp(host, port, **kwargs)

    async def sleep(self, seconds):
        await self.inner.sleep(seconds)


def _post(client, url: str, **kwargs):
    async def go():
        async with client:
            return await client.post(url, json={"model": "m", "messages": []}, **kwargs)

    return run_async(go())


def test_a_name_rebound_to_an_internal_address_after_the_launch_check_is_refused_unconnected(
    production,
):
    production.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]
    resolver, network = answers("127.0.0.1", "10.0.0.7"), Recording()
    base = "http://models.example:9/v1"
    assert model_base_refusal(base, resolver=resolver) is None  # the launch: 127.0.0.1

    with pytest.raises(pinned.BaseRefused, match="10.0.0.7.*private"):
        _post(pinned.new_client(resolver=resolver, inner=network), f"{base}/chat/completions")
    assert network.connected == []  # nothing was connected to: not the new address, not any


def test_the_connection_goes_to_the_address_checked_resolved_once_verifying_the_name(
    production,
):
    production.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]
    with FakeUpstream() as fake:
        port = fake.server.server_address[1]
        # Answers 127.0.0.1 once, then an address nothing listens on: a second lookup would
        # send the call elsewhere.
        resolver, network = answers("127.0.0.1", "10.0.0.7"), Recording()
        response = _post(
            pinned.new_client(resolver=resolver, inner=network),
            f"http://models.example:{port}/v1/chat/completions",
            headers={"Authorization": f"Bearer {KEY}"},
        )
    assert response.status_code == 200
    assert resolver.asked == ["models.example"]  # once, for the check and the connection
    assert network.connected == [("127.0.0.1", port)]
    assert fake.seen == [
        {
            "authorization": f"Bearer {KEY}",
            "host": f"models.example:{port}",
            "path": "/v1/chat/completions",
        }
    ]


def test_the_router_follows_no_redirect(production):
    production.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]
    with FakeUpstream() as elsewhere, FakeUpstream() as fake:
        fake.fail = (307, b"")
        fake.fail_headers = {"Location": f"{elsewhere.base_url}/chat/completions"}
        response = _post(pinned.new_client(), f"{fake.base_url}/chat/completions")
    assert response.status_code == 307
    assert elsewhere.requests == []


def test_a_unix_socket_is_never_connected_to(production):
    backend = pinned.PinnedBackend()
    with pytest.raises(pinned.BaseRefused):
        run_async(backend.connect_unix_socket("/var/run/docker.sock"))
