"""The Node SDK (sdk/node/, npm `belvedir` and `@fractalresearch/loop`) against the platform.

A Node harness (tests/traces/node_sdk/run.mjs) imports the built package (the committed dist/,
staged under both names beside the lockfile's node_modules, as the sandbox image has it), calls
a local OpenAI fake with the `openai` npm client inside withSession() and task(), flushes and
reports the outcome to the platform (uvicorn on this test's database). Its session, LLM spans, tasks and outcome
form as the Python SDK's do (tests/traces/test_sdk_e2e.py asserts the same of belvedir 0.6.4),
and flush() resolves only once the platform has stored every span.

Needs sdk/node/node_modules: `make sdk-node` (`npm ci` from the lockfile; `make test` runs it).
"""

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.router.helpers import serving_app
from tests.traces.fake_openai import FakeOpenAI, assert_spans_answer
from traces.models import Session, Span, Task
from traces.services.task_forming import tasks_form

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "node"
HARNESS = Path(__file__).parent / "node_sdk" / "run.mjs"
REPLY = "The answer is 4."
NODE = shutil.which("node") or "node"
# Two openai.chat spans and two workflow spans ("answer questions", "failing task").
SPANS = 4


def _node(*args: str, cwd: Path, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kwargs
    )


@pytest.fixture(scope="module")
def harness_dir():
    """A directory holding run.mjs and a node_modules with both package names (the committed
    dist/) and, linked, the lockfile's dependency tree."""
    installed = SDK / "node_modules"
    if not (installed / "@traceloop" / "node-server-sdk").is_dir():
        pytest.fail("sdk/node/node_modules is missing: run `make sdk-node` (npm ci)")
    work = Path(tempfile.mkdtemp(prefix="node-sdk-"))
    modules = work / "node_modules"
    modules.mkdir()
    done = _node(str(SDK / "scripts" / "stage.mjs"), str(modules), cwd=SDK)
    assert done.returncode == 0, done.stderr
    for entry in installed.iterdir():
        if not (modules / entry.name).exists():
            (modules / entry.name).symlink_to(entry)
    shutil.copy(HARNESS, work / "run.mjs")
    yield work
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def platform(django_db_setup, django_db_blocker, tmp_path_factory):
    """The platform as production serves it (uvicorn, belvedir.asgi) on this test's database.
    Not Django's live server: the OTLP exporter sends its body chunked, which wsgiref cannot
    read (the ASGI server, gunicorn and the sandbox gateway can)."""
    with django_db_blocker.unblock(), serving_app(tmp_path_factory.mktemp("uvicorn")) as url:
        yield url


@pytest.fixture
def fake_openai():
    with FakeOpenAI(reply=REPLY) as fake:
        yield fake


def run_harness(
    harness_dir: Path,
    *,
    package: str,
    legacy: bool,
    key: str,
    platform: str,
    session_id: str,
    model_api_base: str,
) -> dict:
    """Run run.mjs with the contract's variables (only the FRACTAL_* ones when `legacy`); at
    FLUSHED (the harness waits) count the session's stored spans into `stored_at_flush`."""
    prefix = "FRACTAL" if legacy else "BELVEDIR"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BELVEDIR_", "FRACTAL_"))}
    env = {
        **clean,
        "PACKAGE": package,
        "LEGACY_ENV": "1" if legacy else "0",
        f"{prefix}_API_KEY": key,
        f"{prefix}_BASE_URL": platform,
        f"{prefix}_RUN_ID": session_id,
        "MODEL_API_BASE": model_api_base,
    }
    proc = subprocess.Popen(
        [NODE, "run.mjs"],
        cwd=harness_dir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == "FLUSHED":
                break
        assert lines and lines[-1].strip() == "FLUSHED", "".join(lines) + proc.stderr.read()
        stored = Span.objects.filter(session__external_id=session_id).count()
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    (result,) = [line for line in out.splitlines() if line.startswith("RESULT ")]
    return {**json.loads(result.removeprefix("RESULT ")), "stored_at_flush": stored}


def assert_formed_like_the_python_sdk(project, session_id: str, fake_openai) -> None:
    """What test_sdk_e2e.py asserts of the Python SDK's session, for the Node SDK's."""
    session = Session.objects.get(project=project, external_id=session_id)
    assert session.outcome == "success"
    spans = list(Span.objects.filter(session=session))
    assert len(spans) == SPANS, [s.name for s in spans]

    calls = fake_openai.chat_requests()
    assert len(calls) == 2
    llm = sorted((s for s in spans if s.is_llm), key=lambda s: s.start_time)
    # Each call carries a W3C traceparent naming its LLM span, as the Python SDK's do (the SDK
    # wraps fetch): the model router's span of it continues the client's.
    sent = [{k.lower(): v for k, v in c["headers"].items()}.get("traceparent") for c in calls]
    assert sent == [f"00-{s.trace_id}-{s.span_id}-01" for s in llm]
    # Named as OpenLLMetry's Node instrumentation names them ("chat {model}", OTel's GenAI
    # conventions); the Python one's are "openai.chat". Nothing reads the name.
    assert [s.name for s in llm] == ["chat gpt-4o-mini", "chat gpt-4o-mini"]
    assert_spans_answer(llm, calls, REPLY)
    assert session.llm_call_count == 2
    assert session.model == "gpt-4o-mini"

    workflows = {s.name: s for s in spans if s.span_kind == "workflow"}
    assert set(workflows) == {"answer questions.workflow", "failing task.workflow"}
    assert {s.parent_span_id for s in llm} == {workflows["answer questions.workflow"].span_id}
    assert workflows["failing task.workflow"].status_code == "error"

    tasks_form(session=session)
    tasks = {t.name: t for t in Task.objects.filter(session=session)}
    assert set(tasks) == {"answer questions", "failing task"}
    answer = tasks["answer questions"]
    assert (answer.kind, answer.llm_call_count) == ("workflow", 2)
    assert answer.total_tokens == sum(s.total_tokens for s in llm)
    assert tasks["failing task"].status == "error"
    assert answer.group.success_count == 1


@pytest.mark.parametrize(
    "package, legacy",
    [("belvedir", False), ("@fractalresearch/loop", True)],
    ids=["belvedir", "fractalresearch-loop-legacy-names"],
)
def test_the_node_sdk_traces_into_a_session_like_the_python_sdk(
    owner, platform, fake_openai, harness_dir, package, legacy
):
    """Both package names; the second as 001's snippet has it, with only FRACTAL_* in the
    environment and nothing passed to initialize() or withSession(): the SDK reads them."""
    session_id = f"run_node_sdk_{int(legacy)}"
    result = run_harness(
        harness_dir,
        package=package,
        legacy=legacy,
        key=owner.key,
        platform=platform,
        session_id=session_id,
        model_api_base=fake_openai.base_url,
    )
    # flush() had resolved only once every span was stored.
    assert result == {
        "answers": [REPLY, REPLY],
        "reported": True,
        "unknown": False,
        "stored_at_flush": SPANS,
    }
    assert_formed_like_the_python_sdk(owner.project, session_id, fake_openai)


def test_the_spans_carry_the_python_sdks_attributes(
    owner, platform, fake_openai, harness_dir, capture
):
    """The same calls through both SDKs: the Node SDK's task span has the attributes the Python
    SDK's task() span has in its capture (tests/traces/fixtures/sdk_batch.json, the `capture`
    fixture), values and all, and its LLM spans are read into the same fields."""
    session_id = "run_node_sdk_compare"
    run_harness(
        harness_dir,
        package="belvedir",
        legacy=False,
        key=owner.key,
        platform=platform,
        session_id=session_id,
        model_api_base=fake_openai.base_url,
    )
    node = {s.name: s for s in Span.objects.filter(session__external_id=session_id)}
    python = {s.name: s for s in Span.objects.filter(session=capture)}

    def renamed(attributes: dict, session: str, name: str) -> dict:
        return {
            key: (
                session
                if key.endswith(".session_id")
                else name
                if key.startswith(("traceloop.workflow", "traceloop.entity"))
                else value
            )
            for key, value in attributes.items()
        }

    py_task, node_task = python["answer the question.workflow"], node["answer questions.workflow"]
    assert node_task.attributes == renamed(py_task.attributes, session_id, "answer questions")
    for field in ("kind", "span_kind", "parent_span_id", "status_code", "is_llm"):
        assert getattr(node_task, field) == getattr(py_task, field), field
    py_failing, node_failing = python["failing task.workflow"], node["failing task.workflow"]
    assert (node_failing.status_code, node_failing.status_message) == (
        py_failing.status_code,
        py_failing.status_message,
    )
    assert [e["name"] for e in node_failing.events] == [e["name"] for e in py_failing.events]

    py_llm = next(s for s in python.values() if s.name == "openai.chat")
    node_llm = Span.objects.filter(session__external_id=session_id, is_llm=True).first()
    for field in ("kind", "is_llm", "span_kind"):
        assert getattr(node_llm, field) == getattr(py_llm, field), field
    for key in (
        "traceloop.workflow.name",
        "traceloop.association.properties.session_id",
        "traceloop.association.properties.user_id",
        "traceloop.association.properties.harness",
        "gen_ai.request.model",
        "gen_ai.response.model",
    ):
        assert key in node_llm.attributes and key in py_llm.attributes, key
    for field in (
        "model",
        "input_messages",
        "output_messages",
        "input_tokens",
        "output_tokens",
        "total_tokens",
    ):
        assert getattr(node_llm, field) and getattr(py_llm, field), field


def test_the_packages_own_unit_tests():
    """`npm test` in sdk/node: span shapes, flush, outcomes, legacy names, export failures."""
    tests = sorted(str(p.relative_to(SDK)) for p in (SDK / "test").glob("*.test.mjs"))
    assert tests
    done = _node("--test", *tests, cwd=SDK, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_committed_dist_is_built_from_src(tmp_path):
    """dist/ is committed (so a fresh clone needs no build); it must be what src/ builds to."""
    done = _node(str(SDK / "scripts" / "build.mjs"), str(tmp_path / "dist"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    built = {
        p.relative_to(tmp_path / "dist"): p.read_bytes()
        for p in (tmp_path / "dist").rglob("*")
        if p.is_file()
    }
    committed = {
        p.relative_to(SDK / "dist"): p.read_bytes()
        for p in (SDK / "dist").rglob("*")
        if p.is_file()
    }
    assert built.keys() == committed.keys()
    stale = [str(path) for path in built if built[path] != committed[path]]
    assert not stale, f"sdk/node/dist is stale: npm run build in sdk/node ({stale})"


def test_the_key_pages_node_snippet_traces_as_pasted(
    owner, platform, fake_openai, harness_dir, settings
):
    """The Project settings page's Node snippet (docs/sdk-node.md's, with the key and URL), as
    a user pastes it into agent.mjs, its task making one call: the session, its LLM span, its
    task and the outcome form. The npm install line is tests/belvedir/test_sdk_package.py's."""
    settings.BELVEDIR_BASE_URL = platform
    page = owner.web.get("/settings/project/").content.decode()
    snippet = html.unescape(re.search(r'<pre id="snippet-sdk-node">(.*?)</pre>', page, re.S)[1])
    install, program = snippet.split("\n\n", 1)
    assert install == f"npm install {platform}/sdk/node/belvedir.tgz openai"
    call = (
        f"const client = new OpenAI({{ baseURL: {json.dumps(fake_openai.base_url)}, "
        'apiKey: "sk-fake" }); await client.chat.completions.create({ model: "gpt-4o-mini", '
        'messages: [{ role: "system", content: "Answer briefly." }, '
        '{ role: "user", content: "What is 2 + 2?" }] });'
    )
    program = (
        program.replace("bv_live_…", owner.key)
        .replace('"my-first-session"', '"run_node_key_page"')
        .replace("/* ... run your agent ... */", call)
        .replace('await reportOutcome("run_node_key_page", "success");', "")
        + 'console.log("REPORTED", await reportOutcome("run_node_key_page", "success"));\n'
    )
    assert "reportOutcome(" in snippet and "await task(" in program
    (harness_dir / "agent.mjs").write_text(program)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BELVEDIR_", "FRACTAL_"))}
    done = _node("agent.mjs", cwd=harness_dir, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "REPORTED true", done.stdout + done.stderr
    session = Session.objects.get(project=owner.project, external_id="run_node_key_page")
    assert session.outcome == "success"
    spans = list(Span.objects.filter(session=session))
    assert sorted(s.name for s in spans) == ["answer question.workflow", "chat gpt-4o-mini"]
    assert_spans_answer([s for s in spans if s.is_llm], fake_openai.chat_requests(), REPLY)
    tasks_form(session=session)
    assert [t.name for t in Task.objects.filter(session=session)] == ["answer question"]
