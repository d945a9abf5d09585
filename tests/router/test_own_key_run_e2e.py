"""End to end: a plain harness launched with the user's own model key, executed by a queue
worker (the runs cluster) in a gVisor sandbox, its calls through the router (uvicorn, reached
by the sandbox gateway) to the user's provider (a local fake where sandboxes could reach it
too). With the proxy on (the default) every call is traced and billed to the user's provider,
the key reaches the upstream and is nowhere in the sandbox (its environment, its files), the
log, the results, the spans or the run's API output. BELVEDIR_MODEL_PROXY=off keeps the
behaviour from before the proxy: the raw key and base in the sandbox, which calls the
provider itself."""

import json
import subprocess
from pathlib import Path

import pytest

from harnesses.services import harness_create
from runs import services as run_services
from runs.models import Run
from sandboxes.gateway import GatewayThread
from tests.helpers.run_fixtures import sandbox_ports, serve_to_sandboxes, worker_env
from tests.router.fake_upstream import PROMPT_TOKENS, FakeUpstream
from tests.router.helpers import INPUT_PRICE, MODEL, OUTPUT_PRICE
from tests.runs.helpers import containers_of, git_repo_of, start_qcluster, stop_qcluster, wait_for
from traces.models import Span

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

HARNESS = Path(__file__).resolve().parent / "own_key_harness"
KEY = "sk-user-e2e-9f8e7d6c5b4a3210"
ANSWER = "w0 w1 w2 w3 w4"


@pytest.fixture
def provider():
    """The user's provider: a fake OpenAI-compatible upstream on the gateway IP, where the
    router (on this host) and, with the proxy off, a sandbox reach it."""
    fake = serve_to_sandboxes(lambda host, port: FakeUpstream(host=host, port=port))
    with fake:
        yield fake


@pytest.fixture
def platform(settings, serve_router, tmp_path):
    """The router under uvicorn behind the sandbox gateway, and the runs cluster (one
    worker) running sandboxes under gVisor against it."""
    router_url = serve_router()
    gateway = GatewayThread(
        host=settings.BELVEDIR_SANDBOX_GATEWAY,
        ports=sandbox_ports(),
        upstream=router_url.removesuffix("/api/v1"),
    )
    settings.BELVEDIR_SANDBOX_BASE_URL = gateway.url
    settings.BELVEDIR_SANDBOX_MEMORY = "1g"
    settings.BELVEDIR_SANDBOX_RUNTIME = "runsc"
    settings.BELVEDIR_RUN_TIMEOUT = 600
    cluster = start_qcluster(
        "runs", tmp_path / "qcluster.log", Q_WORKERS="1", **worker_env(settings)
    )
    yield gateway.url
    stop_qcluster(cluster)
    gateway.stop()


def _launch(owner, tmp_path, provider, env, django_capture_on_commit_callbacks) -> Run:
    harness = harness_create(
        project=owner.project,
        name="own key",
        repo_url=git_repo_of(HARNESS, tmp_path / "own-key-harness"),
        install_command="true",
        run_command="python3 run.py",
        env=env,
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=True):  # enqueued for the cluster
        return run_services.run_launch(
            project=owner.project,
            harness=harness,
            created_by=owner.user,
            model=MODEL,
            model_api_base=provider.base_url,
            model_api_key=KEY,
        )


def _inside(container, *command: str) -> str:
    done = subprocess.run(
        ["docker", "exec", container.id, *command], capture_output=True, text=True, timeout=120
    )
    return done.stdout + done.stderr


def _sandbox_while_running(run: Run) -> dict:
    """The run's container, looked into while its harness waits: its env (as the engine
    gave it), every file under the workspace, /tmp and the home holding the key, and what
    the harness's own process sees; then the harness is let go."""
    container = wait_for(lambda: containers_of(run.pk), 300, "the run's sandbox")[0]
    wait_for(
        lambda: "sandbox-env.json" in _inside(container, "ls", "/workspace/repo"),
        300,
        "the harness to start",
        every=1,
    )
    container.reload()
    seen = {
        "env": container.attrs["Config"]["Env"],
        "files": _inside(container, "grep", "-rlF", KEY, "/workspace", "/tmp", "/home"),
        "process": _inside(container, "sh", "-c", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'"),
    }
    _inside(container, "touch", "/workspace/repo/.belvedir-go")
    return seen


def _finished(run: Run) -> Run:
    wait_for(lambda: Run.objects.get(pk=run.pk).is_terminal, 600, "the run to finish", every=0.5)
    return Run.objects.get(pk=run.pk)


def test_an_own_key_run_is_proxied_traced_and_never_holds_the_key(
    owner,
    covered_model,
    upstream,
    provider,
    platform,
    tmp_path,
    django_capture_on_commit_callbacks,
):
    run = _launch(owner, tmp_path, provider, {}, django_capture_on_commit_callbacks)
    assert run.model_proxied and not run.covered
    seen = _sandbox_while_running(run)
    run = _finished(run)

    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["answers"] == [ANSWER, ANSWER]
    assert run.results["base"] == f"{platform}/api/v1"  # the router, not the provider
    # The user's key reached the user's provider, on both calls, and only it.
    assert [s["authorization"] for s in provider.seen] == [f"Bearer {KEY}"] * 2
    assert upstream.requests == []
    assert f"MODEL_API_BASE={platform}/api/v1" in seen["env"]
    assert not any(KEY in item for item in seen["env"]), seen["env"]
    assert KEY not in seen["files"] and "/workspace" not in seen["files"], seen["files"]
    assert KEY not in seen["process"] and "MODEL_API_KEY=bv_" in seen["process"]
    # Every call traced in the run's session, billed to the user's provider.
    # (the router settles its calls in batches, after answering: they may land just after)
    wait_for(lambda: Span.objects.filter(run=run, from_router=True).count() >= 2, 30, "spans")
    spans = list(Span.objects.filter(run=run, from_router=True))
    assert len(spans) == 2
    estimate = PROMPT_TOKENS * INPUT_PRICE // 10**6 + 5 * OUTPUT_PRICE // 10**6
    assert all(s.attributes["belvedir.router.billed_to"] == "provider" for s in spans)
    assert sum(s.attributes["belvedir.router.estimated_cost_micros"] for s in spans) == 2 * estimate
    assert run.covered_spent_micros == 0
    # The key is nowhere the run can be read from (and nothing had to be redacted).
    session = spans[0].session
    outputs = [
        owner.api.get(f"/api/v1/runs/{run.pk}"),
        owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 0}),
        owner.api.get("/api/v1/runs"),
        owner.web.get(f"/runs/{run.pk}/"),
        owner.web.get(f"/traces/sessions/{session.pk}/"),
        owner.web.get(f"/traces/?run={run.pk}&fragment=run-summary", HTTP_HX_REQUEST="true"),
        *(owner.web.get(f"/traces/sessions/{session.pk}/spans/{s.pk}/") for s in spans),
    ]
    assert [r.status_code for r in outputs] == [200] * len(outputs)
    everything = "".join(r.content.decode() for r in outputs) + run.log_tail
    everything += json.dumps([[s.attributes, s.status_message] for s in spans])
    assert KEY not in everything
    assert "[redacted]" not in run.log_tail + json.dumps(run.results)
    for page in (outputs[4], outputs[5]):  # the session page, the run page's traces part
        assert "Billed to your provider: 2 calls with your own key" in page.content.decode()
    assert "your provider, called through the Belvedir router" in outputs[3].content.decode()


def test_with_the_proxy_off_the_sandbox_gets_the_raw_key_and_calls_the_provider_itself(
    owner,
    covered_model,
    upstream,
    provider,
    platform,
    tmp_path,
    django_capture_on_commit_callbacks,
):
    env = {"BELVEDIR_MODEL_PROXY": "off"}
    run = _launch(owner, tmp_path, provider, env, django_capture_on_commit_callbacks)
    assert not run.model_proxied
    seen = _sandbox_while_running(run)
    run = _finished(run)

    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["base"] == provider.base_url
    assert f"MODEL_API_KEY={KEY}" in seen["env"]
    assert [s["authorization"] for s in provider.seen] == [f"Bearer {KEY}"] * 2
    assert not Span.objects.filter(run=run, from_router=True).exists()
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert "BELVEDIR_MODEL_PROXY=off" in page
    assert containers_of(run.pk) == []
