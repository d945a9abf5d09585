"""End to end: examples/node-harness, a Node harness on the Node SDK the sandbox image carries,
launched through the platform's plain-harness path in the Docker sandbox, offline.

Its `npm ci` installs the `openai` client from a local registry on the sandbox gateway (the
tarball from the host's npm cache, which `make sdk-node` filled: sdk/node's lockfile pins the
same openai); `belvedir` and `@fractalresearch/loop` come from the image's global node_modules.
Its calls go to a local OpenAI fake, its spans through the sandbox gateway to the platform under
uvicorn (production's server: the OTLP exporter sends chunked bodies, which Django's WSGI live
server cannot read) on this test's database.
"""

import base64
import hashlib
import http.server
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from harnesses.services import harness_create
from runs import services as run_services
from runs.executor import execute_run
from tests.helpers.run_fixtures import http_for_sandboxes, sandbox_ports
from tests.router.helpers import serving_app
from tests.runs.helpers import containers_of, git_repo_of
from tests.traces.fake_openai import DEFAULT_REPLY, assert_spans_answer
from traces.models import Session, Span, Task
from traces.services.task_forming import tasks_form

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

HARNESS = Path(__file__).resolve().parents[2] / "examples" / "node-harness"
INSTALL = "npm ci --no-audit --no-fund"
RUN = "node run.mjs"
REPLY = DEFAULT_REPLY


def _lockfile_packages() -> dict[str, dict]:
    lock = json.loads((HARNESS / "package-lock.json").read_text())
    return {
        path.removeprefix("node_modules/"): entry
        for path, entry in lock["packages"].items()
        if path.startswith("node_modules/")
    }


def _tarball_name(name: str, version: str) -> str:
    return f"{name.split('/')[-1]}-{version}.tgz"


@pytest.fixture(scope="module")
def npm_tarballs() -> Path:
    """The example's lockfile packages as the registry's own tarballs, from the host's npm cache
    only (`--offline`: nothing is fetched), checked against the lockfile's integrity."""
    out = Path(tempfile.mkdtemp(prefix="npm-tarballs-"))
    for name, entry in _lockfile_packages().items():
        file = _tarball_name(name, entry["version"])
        url = f"https://registry.npmjs.org/{name}/-/{file}"
        done = subprocess.run(
            ["npm", "pack", url, "--offline", "--pack-destination", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{name}: not in the npm cache (make sdk-node)\n{done.stderr}"
        digest = base64.b64encode(hashlib.sha512((out / file).read_bytes()).digest()).decode()
        assert f"sha512-{digest}" == entry["integrity"], name
    return out


@pytest.fixture
def npm_registry(npm_tarballs):
    """A registry of just those packages where sandboxes reach it: GET /<name> is its document,
    GET /<name>/-/<file>.tgz its tarball."""
    packages = _lockfile_packages()

    class Registry(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            name = self.path.strip("/").split("/-/")[0].replace("%2f", "/").replace("%2F", "/")
            entry = packages.get(name)
            if entry is None:
                return self._send(404, b"{}", "application/json")
            file = _tarball_name(name, entry["version"])
            if "/-/" in self.path:
                return self._send(200, (npm_tarballs / file).read_bytes(), "application/gzip")
            host = f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"
            version = {
                "name": name,
                "version": entry["version"],
                "dist": {"tarball": f"{host}/{name}/-/{file}", "integrity": entry["integrity"]},
            }
            document = {
                "name": name,
                "dist-tags": {"latest": entry["version"]},
                "versions": {entry["version"]: version},
            }
            self._send(200, json.dumps(document).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with http_for_sandboxes(Registry, "npm-registry") as url:
        yield url


@pytest.fixture
def sandbox(settings, tmp_path):
    """Sandboxes as production runs them, reaching the platform under uvicorn through the
    sandbox gateway."""
    from sandboxes.gateway import GatewayThread

    settings.BELVEDIR_SANDBOX_MEMORY = "2g"
    settings.BELVEDIR_SANDBOX_CPUS = 2.0
    settings.BELVEDIR_RUN_TIMEOUT = 600
    with serving_app(tmp_path) as url:
        gateway = GatewayThread(
            host=settings.BELVEDIR_SANDBOX_GATEWAY, ports=sandbox_ports(), upstream=url
        )
        settings.BELVEDIR_SANDBOX_BASE_URL = gateway.url
        try:
            yield settings
        finally:
            gateway.stop()


@pytest.mark.parametrize("package", ["belvedir", "@fractalresearch/loop"])
def test_the_node_harness_traces_its_run_into_its_session(
    owner,
    sandbox,
    npm_registry,
    sandbox_openai,
    tmp_path,
    django_capture_on_commit_callbacks,
    package,
):
    harness = harness_create(
        project=owner.project,
        name="node",
        repo_url=git_repo_of(HARNESS, tmp_path / "node-harness"),
        install_command=INSTALL,
        run_command=RUN,
        env={
            "npm_config_registry": npm_registry,
            "npm_config_update_notifier": "false",
            "SDK_PACKAGE": package,
        },
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = run_services.run_launch(
            project=owner.project,
            harness=harness,
            created_by=owner.user,
            model="gpt-4o-mini",
            model_api_base=sandbox_openai.base_url,
            model_api_key="sk-fake-for-tests",
        )

    execute_run(run.pk)

    run.refresh_from_db()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert containers_of(run.pk) == []
    assert run.score == 1.0
    assert run.results["outcome_reported"] is True, run.log_tail
    assert run.results["answers"] == [REPLY, REPLY]
    assert not run.traces_incomplete

    calls = sandbox_openai.chat_requests()
    assert len(calls) == 2

    session = Session.objects.get(project=owner.project, external_id=run.pk)
    assert session.run == run
    assert session.outcome == "success"
    spans = list(Span.objects.filter(session=session))
    assert {s.run_id for s in spans} == {run.pk}
    llm = sorted((s for s in spans if s.is_llm and not s.from_router), key=lambda s: s.start_time)
    assert_spans_answer(llm, calls, REPLY)
    # Launched with a key of its own, its calls went through the router (the model proxy):
    # each router span continues its SDK span (the fetch's traceparent) and counts for it.
    router = [s for s in spans if s.from_router]
    assert sorted((r.trace_id, r.parent_span_id) for r in router) == sorted(
        (s.trace_id, s.span_id) for s in llm
    )
    assert sorted(s.duplicate_of_id for s in llm) == sorted(r.pk for r in router)
    assert session.llm_call_count == 2
    assert session.model == "gpt-4o-mini"

    workflows = [s for s in spans if s.span_kind == "workflow"]
    assert [s.name for s in workflows] == ["answer question.workflow"] * 2
    assert sorted(s.parent_span_id for s in llm) == sorted(s.span_id for s in workflows)

    tasks_form(session=session)
    tasks = list(Task.objects.filter(session=session))
    assert [(t.name, t.kind, t.llm_call_count) for t in tasks] == [
        ("answer question", "workflow", 1)
    ] * 2
    assert tasks[0].group == tasks[1].group
