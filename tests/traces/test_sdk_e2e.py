"""End to end: the real belvedir SDK in a harness run through the platform in the Docker sandbox.

examples/traced-harness installs belvedir 0.6.4 and openai, calls a local OpenAI-compatible
fake inside `belvedir.session(session_id=BELVEDIR_RUN_ID)`, flushes, reports an outcome and
writes results.json. Its spans come back to this test's live server with the run's key. It
is launched with a key of its own, so its calls go through the router (the model proxy) and
each counts once: the SDK's span and the router's, linked by trace context.

The harness installs from a local wheel cache (no index): the wheels for the sandbox's
Python 3.13 are downloaded once into $BELVEDIR_CACHE_DIR/wheels/ and served on the sandbox network's gateway IP.
"""

import functools
import hashlib
import http.server
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from harnesses.services import harness_create
from runs import contract
from runs import services as run_services
from runs.executor import execute_run
from tests.helpers.run_fixtures import http_for_sandboxes
from tests.runs.helpers import containers_of, git_repo_of
from tests.traces.fake_openai import DEFAULT_REPLY, assert_spans_answer
from tests.traces.helpers import TRACES, body_of, span
from traces.models import Session, Span, Task
from traces.services.task_forming import tasks_form

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

HARNESS = Path(__file__).resolve().parents[2] / "examples" / "traced-harness"
INSTALL = (
    "python3 -m venv .venv && .venv/bin/pip install --progress-bar off -U pip"
    " && .venv/bin/pip install --progress-bar off -r requirements.txt"
)
RUN = ".venv/bin/python run.py"
REPLY = DEFAULT_REPLY
# The sandbox image's interpreter; wheels are picked for it.
SANDBOX_PYTHON = ("3.13", "cp313")
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
]
# Dependencies published only as sdists: built once into pure-Python wheels on the host,
# since a download for another interpreter takes wheels only.
SDIST_ONLY = ["cuid==0.4"]


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"pip {' '.join(args[:2])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


@pytest.fixture(scope="session")
def sdk_wheels() -> Path:
    """Every wheel the traced harness installs, for the sandbox's Python, downloaded once."""
    requirements = (HARNESS / "requirements.txt").read_text()
    digest = hashlib.sha256(
        (requirements + repr(SANDBOX_PYTHON) + repr(SDIST_ONLY)).encode()
    ).hexdigest()[:12]
    root = Path(django_settings.BELVEDIR_CACHE_DIR) / "wheels"
    target = root / f"traced-harness-{digest}"
    if (target / ".complete").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".download-", dir=root))
    try:
        _pip("wheel", "--no-deps", "-w", str(staging), *SDIST_ONLY)
        version, abi = SANDBOX_PYTHON
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        _pip(
            "download",
            "-d",
            str(staging),
            "--find-links",
            str(staging),
            "--only-binary=:all:",
            "--python-version",
            version,
            "--implementation",
            "cp",
            "--abi",
            abi,
            *platforms,
            "pip",
            "-r",
            str(HARNESS / "requirements.txt"),
        )
        (staging / ".complete").write_text(requirements)
        try:
            staging.rename(target)  # atomic: a concurrent session either sees all or nothing
        except OSError:
            if not (target / ".complete").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@pytest.fixture(scope="session")
def wheel_index(sdk_wheels) -> str:
    """The wheel cache served where sandboxes reach it (a directory listing is a find-links
    page): the gateway IP, in the sandbox port range."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(sdk_wheels))
    with http_for_sandboxes(handler, "wheel-index") as url:
        yield url


@pytest.fixture
def sandbox(settings, sandbox_gateway):
    """Sandboxes as production runs them; they reach this test's live server through the
    sandbox gateway."""
    settings.BELVEDIR_SANDBOX_MEMORY = "2g"
    settings.BELVEDIR_SANDBOX_CPUS = 2.0
    settings.BELVEDIR_RUN_TIMEOUT = 600
    return settings


def test_the_sdk_traces_a_harness_run_into_its_session(
    owner, sandbox, wheel_index, sandbox_openai, tmp_path, django_capture_on_commit_callbacks
):
    harness = harness_create(
        project=owner.project,
        name="traced",
        repo_url=git_repo_of(HARNESS, tmp_path / "traced-harness"),
        install_command=INSTALL,
        run_command=RUN,
        env={
            "PIP_FIND_LINKS": wheel_index,
            "PIP_NO_INDEX": "1",
            "PIP_TRUSTED_HOST": django_settings.BELVEDIR_SANDBOX_GATEWAY,
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
    run_key = contract.run_model_secrets(run)["run_key"]

    execute_run(run.pk)

    run.refresh_from_db()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert containers_of(run.pk) == []
    assert run.score == 1.0
    assert run.results["outcome_reported"] is True, run.log_tail
    assert run.results["answers"] == [REPLY, REPLY]

    # The harness really called the model server, through the router (its own key, proxied:
    # the sandbox had the router and the run key), which got the user's key.
    calls = sandbox_openai.chat_requests()
    assert len(calls) == 2
    assert all(c["body"]["model"] == "gpt-4o-mini" for c in calls)
    assert all(
        {k.lower(): v for k, v in c["headers"].items()}["authorization"]
        == "Bearer sk-fake-for-tests"
        for c in calls
    )

    # Its session: named by the run id, attributed to the run, with the reported outcome.
    session = Session.objects.get(project=owner.project, external_id=run.pk)
    assert session.run == run
    assert session.outcome == "success"
    spans = list(Span.objects.filter(session=session))
    assert {s.run_id for s in spans} == {run.pk}

    llm = [s for s in spans if s.is_llm and not s.from_router]
    assert [s.name for s in llm] == ["openai.chat", "openai.chat"]
    assert_spans_answer(llm, calls, REPLY)
    # One call, one span: the SDK sent the router its span's W3C traceparent, the router's
    # span continues it (the SDK's span its parent) and counts for it.
    router = [s for s in spans if s.from_router]
    assert sorted((r.trace_id, r.parent_span_id) for r in router) == sorted(
        (s.trace_id, s.span_id) for s in llm
    )
    assert sorted(s.duplicate_of_id for s in llm) == sorted(r.pk for r in router)
    assert all(r.attributes["belvedir.router.billed_to"] == "provider" for r in router)
    assert session.llm_call_count == 2
    assert session.input_tokens == sum(s.input_tokens for s in llm)
    assert session.model == "gpt-4o-mini"

    (workflow,) = [s for s in spans if s.span_kind == "workflow"]
    assert workflow.name == "answer questions.workflow"
    assert {s.parent_span_id for s in llm} == {workflow.span_id}

    # Tasks form from the workflow span.
    tasks_form(session=session)
    (task,) = Task.objects.filter(session=session)
    assert (task.name, task.kind, task.llm_call_count) == ("answer questions", "workflow", 2)
    assert task.total_tokens == sum(s.total_tokens for s in llm)
    assert task.group.success_count == 1

    # The run page pulls in its trace summary, which links to it.
    summary_url = f"/traces/?run={run.pk}&fragment=run-summary"
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert f'hx-get="{summary_url.replace("&", "&amp;")}"' in page
    summary = owner.web.get(summary_url, HTTP_HX_REQUEST="true").content.decode()
    assert f"/traces/sessions/{session.pk}/" in summary

    # The run is over: its key no longer sends anything.
    response = Client().post(
        TRACES,
        data=b'{"resourceSpans": []}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {run_key}",
    )
    assert response.status_code == 401
    late = Client().post(
        TRACES,
        data=json.dumps(body_of(span("late"))).encode(),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {run_key}",
    )
    assert late.status_code == 401
    assert not Span.objects.filter(name="late").exists()
