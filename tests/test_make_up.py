"""End to end, offline, on the platform exactly as `make up` serves it (scripts/up.sh: uvicorn,
the sandbox gateway, both django-q2 clusters, the settings it sets; tests/helpers/make_up.py):

- the demo it makes: its login, its "make up" key (kept in var/, 0600), its harness run to a score;
- a new user signs up in Chromium, makes an API key and turns pay as you go on;
- a plain harness (a local git repo) and the catalog's Belvedir Runner card (a scripted model
  and judge, served where sandboxes reach them) run to their scores, the Runner tracing its
  calls into the run's session;
- the key page's SDK snippet, run with the real belvedir SDK (PyPI belvedir==0.6.4, as the
  sandbox image carries it: its import name is this platform's own package, so it runs in a
  container of that image on the host's network), lands on the Traces page and API;
- an environment of the four verifier kinds, "Use in a harness" with Runner on Harbor, runs
  managed under Harbor with the oracle agent, each task in a task sandbox, to 1.0;
- a restart keeps the user signed in and the demo key; nothing was written to the checkout's var/.

Every failure message ends with the instance's logs (up.sh's output, var/*.log).
"""

import json
import os
import re
import socket
import subprocess
import time

import psycopg
import pytest
import requests
from playwright.sync_api import expect

from runs.results import task_results
from tests.drivers.helpers import EXPECTED, SCRIPTS, TASKS_TEXT, ScriptedLLM
from tests.helpers.chromium import policed_page
from tests.helpers.databases import database_exists, unmade_database_url
from tests.helpers.harbor import FOUR_KINDS
from tests.helpers.make_up import LOGS, ROOT, Platform, group_alive, stop_left_clusters
from tests.helpers.run_fixtures import serve_to_sandboxes
from tests.runs.helpers import containers_of, git_repo_of
from tests.traces.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.docker, pytest.mark.browser, pytest.mark.slow]

EMAIL, PASSWORD = "grace@example.com", "compiler-9-long"
JUDGE_KEY = "sk-judge-e2e"
SDK_IMAGE = "belvedir-sandbox:latest"  # its /opt/venv holds belvedir==0.6.4 from PyPI
RUNNING = ("queued", "running")


@pytest.fixture
def platform(tmp_path, tmp_path_factory, llm, judge):
    """The platform, its ports chosen once the fake servers hold theirs. Clusters that an
    earlier session's instance left running once its up.sh was killed are stopped first."""
    for var in tmp_path_factory.getbasetemp().parent.glob("pytest-*/*/var"):
        stop_left_clusters(var)
    with unmade_database_url("belvedir_up") as url:
        platform = Platform.made(url, tmp_path / "var")
        instance = platform.instance()
        try:
            yield platform
        finally:
            try:
                platform.stop()
            finally:  # what it left on the host goes even when stopping it failed
                platform.release(*instance)


@pytest.fixture
def llm():
    """The Runner's model under test and judge, where sandboxes reach them."""
    with serve_to_sandboxes(lambda host, port: ScriptedLLM(SCRIPTS, host=host, port=port)) as llm:
        yield llm


@pytest.fixture
def judge():
    """The Harbor verifiers' judge, where task sandboxes reach it: every answer is worth 1."""
    with serve_to_sandboxes(
        lambda host, port: FakeOpenAI(reply='{"score": 1, "reason": "fine"}', host=host, port=port)
    ) as fake:
        yield fake


def api_of(key: str) -> requests.Session:
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {key}"
    return api


class Api:
    """The REST API with one key; every answer checked, with the instance's logs on failure."""

    def __init__(self, platform: Platform, key: str):
        self.platform, self.session = platform, api_of(key)

    def call(self, method: str, path: str, status: int = 200, **kwargs) -> dict:
        answer = self.session.request(method, f"{self.platform.base}{path}", timeout=30, **kwargs)
        assert answer.status_code == status, (
            f"{method} {path}: {answer.status_code} {answer.text[:2000]}\n{self.platform.logs()}"
        )
        return answer.json()

    def launch(self, harness: str, **values) -> str:
        return self.call("POST", "/api/v1/runs", 201, json={"harness": harness, **values})["id"]

    def finished(self, run_id: str, timeout: float) -> dict:
        """The run once it is over, polled every second for up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (run := self.call("GET", f"/api/v1/runs/{run_id}"))["status"] in RUNNING:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"run {run_id} still {run['status']} after {timeout:.0f} s:\n"
                    f"{run['log_tail'][-3000:]}\n{self.platform.logs()}"
                )
            time.sleep(1)
        return run


def wait_for(predicate, timeout: float, what: str, platform: Platform):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}\n{platform.logs()}")
        time.sleep(1)
    return value


def assert_succeeded(run: dict, score: float, platform: Platform) -> None:
    failure = f"{run['notes']}\n{run['log_tail'][-3000:]}\n{platform.logs()}"
    assert run["status"] == "succeeded", failure
    assert run["score"] == pytest.approx(score), failure


def sign_up_with_a_key(page) -> tuple[str, str]:
    """Sign up, make an API key, turn pay as you go on; the key and the key page's SDK snippet."""
    page.goto("/signup/")
    page.fill("#id_email", EMAIL)
    page.fill("#id_password", PASSWORD)
    page.fill("#id_organization", "Hopper")
    page.click("button[type=submit]")
    expect(page.locator("#onboarding li.step")).to_have_count(4)
    page.click("text=Create an API key")
    page.fill("input[name=key-name]", "laptop")
    page.click("text=Create key")
    expect(page.locator("#new-key code")).to_have_text(re.compile(r"^bv_live_"))
    key = page.locator("#new-key code").inner_text()
    snippet = page.locator("#snippet-sdk").inner_text()
    # Managed Harbor harnesses need credits or pay as you go (Billing, as the owner).
    page.goto("/settings/organization/billing/")
    page.locator("#payg-form #id_payg-pay_as_you_go").check()
    page.locator("#payg-form button[type=submit]").click()
    expect(page.locator("#payg-form")).to_contain_text("On: runs launch past the balance")
    return key, snippet


def send_a_trace(snippet: str, session_id: str, platform: Platform) -> None:
    """The key page's snippet, as a user pastes it, with a task in its session."""
    assert snippet.startswith("pip install belvedir\n"), snippet
    program = snippet.split("\n", 1)[1].replace('"my-first-session"', json.dumps(session_id))
    program = re.sub(
        r"^    \.\.\..*$",
        '    with belvedir.task("say hello"):\n        print("hello")',
        program,
        flags=re.M,
    )
    program += f"\nprint(belvedir.report_outcome({session_id!r}, 'success'))\n"
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", SDK_IMAGE, "/opt/venv/bin/python", "-c"]
        + [program],
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = f"{program}\n-- stdout\n{done.stdout}\n-- stderr\n{done.stderr}"
    assert done.returncode == 0 and "hello" in done.stdout, f"{output}\n{platform.logs()}"
    assert "dropped" not in done.stderr.lower(), f"{output}\n{platform.logs()}"


def test_up_serves_the_demo_and_a_new_user_runs_every_kind_of_harness_and_traces_offline(
    platform, llm, judge, browser, tmp_path
):
    checkout_var = {name: (ROOT / "var" / name) for name in (*LOGS, "make-up-key")}
    before = {name: p.stat().st_mtime for name, p in checkout_var.items() if p.exists()}
    # Another program on the gateway's port: up.sh stops, saying so, where it used to take the
    # answering port for its gateway and serve sandboxes a stranger.
    with socket.socket() as squatter:
        squatter.bind(("172.30.0.1", int(platform.env["GATEWAY_PORT"])))
        squatter.listen()
        code = platform.start_failing(tmp_path / "up-port-taken.log")
    failed = platform.output()
    assert code == 1 and "up: the sandbox gateway did not start on 172.30.0.1:" in failed, failed
    assert "Address already in use" in failed, failed

    platform.start(tmp_path / "up.log")
    text = platform.output()
    assert database_exists(platform.env["DATABASE_URL"]), text
    assert "demo@belvedir.local / belvedir-demo" in text
    gateway = f"http://172.30.0.1:{platform.env['GATEWAY_PORT']}"
    assert f"Sandboxes  reach the platform at {gateway}" in text
    # Offline, the Harbor exports build FROM the sandbox image, as up.sh detects it itself
    # (scripts/offline-defaults.sh; the session's own detection made BELVEDIR_EXPORT_BASE_IMAGE).
    base_image = os.environ.get("BELVEDIR_EXPORT_BASE_IMAGE", "python:3.13-slim")
    assert f"Harbor     exports and task images build FROM {base_image}" in text, text
    demo_key = re.search(r"API key\s+(bv_live_\S+)", text).group(1)
    key_file = platform.var / "make-up-key"
    assert key_file.read_text().strip() == demo_key and key_file.stat().st_mode & 0o077 == 0
    demo = Api(platform, demo_key)
    (demo_harness,) = demo.call("GET", "/api/v1/harnesses")["results"]
    assert demo_harness["name"] == "Demo contract harness"
    demo_run = demo.launch(demo_harness["id"], model="demo", model_api_key="sk-demo")

    # A new user, in the browser.
    page = policed_page(browser, platform.base, timeout_ms=20_000)
    key, snippet = sign_up_with_a_key(page)
    assert f'base_url="{platform.base}"' in snippet and key in snippet
    api = Api(platform, key)

    # A plain harness: a local git repo of the contract harness.
    repo = git_repo_of(ROOT / "examples" / "contract-harness", tmp_path / "contract-harness")
    plain = api.call(
        "POST",
        "/api/v1/harnesses",
        201,
        json={
            "name": "plain",
            "repo_url": repo,
            "install_command": "bash install.sh",
            "run_command": "python3 run.py",
            "env": {"SCORE": "0.75"},
        },
    )
    plain_run = api.launch(plain["id"], model="demo", model_api_key="sk-demo")

    # The Belvedir Runner's catalog card, its model and judge the scripted server.
    runner = api.call(
        "POST",
        "/api/v1/harnesses",
        201,
        json={"preset": "runner", "name": "runner", "tasks": TASKS_TEXT},
    )
    assert runner["repo_url"] == f"{platform.base}/git/belvedir-runner.git"
    runner_run = api.launch(
        runner["id"],
        model="model-under-test",
        model_api_base=llm.base_url,
        model_api_key="sk-model-e2e",
        judge_model="judge",
        judge_api_base=llm.base_url,
        judge_api_key=JUDGE_KEY,
        attempts=3,
        grading="pass@k",
    )

    # An environment, "Use in a harness" with Runner on Harbor, the oracle agent.
    environment = api.call(
        "POST",
        "/api/v1/environments",
        201,
        json={"name": "Four kinds", "description": "each verifier kind", "tasks": FOUR_KINDS},
    )["id"]
    page.goto(f"/environments/{environment}/")
    page.locator('#use-in-harness button[data-preset="harbor-runner"]').click()
    page.wait_for_url("**/harnesses/har_*/")
    harbor_id = page.url.rstrip("/").rsplit("/", 1)[1]
    harbor = api.call("GET", f"/api/v1/harnesses/{harbor_id}")
    # Its Tasks field holds the environment's tasks, exported as a Harbor dataset at launch.
    assert "HARBOR_DATASET" not in harbor["env"], harbor
    assert [t["id"] for t in json.loads(harbor["tasks"])] == [t["id"] for t in FOUR_KINDS]
    env = {**harbor["env"], "HARBOR_AGENT": "oracle", "HARBOR_CONCURRENCY": "2"}
    api.call("PATCH", f"/api/v1/harnesses/{harbor_id}", json={"env": env})
    harbor_run = api.launch(
        harbor_id,
        model="oracle",
        model_api_base=judge.base_url,
        model_api_key="sk-unused",
        judge_model="acme/judge",
        judge_api_base=judge.base_url,
        judge_api_key=JUDGE_KEY,
    )

    # The real SDK, as the key page shows it, while the runs run.
    send_a_trace(snippet, "e2e-sdk-session", platform)
    sessions = api.call("GET", "/api/v1/sessions")["results"]  # the Runner's may be there too
    (session,) = [s for s in sessions if s["session_id"] == "e2e-sdk-session"] or [sessions]
    assert session["span_count"] >= 1, session
    assert session["outcome"] == "success", session
    page.goto("/traces/")
    expect(page.locator("main")).to_contain_text("e2e-sdk-session")
    page.get_by_role("link", name="e2e-sdk-session").click()
    expect(page.locator("#session-outcome")).to_have_text("success")
    expect(page.locator("#span-tree")).to_contain_text("say hello")

    assert_succeeded(demo.finished(demo_run, 180), 0.85, platform)
    assert_succeeded(api.finished(plain_run, 180), 0.75, platform)
    run = api.finished(runner_run, 600)
    assert_succeeded(run, EXPECTED["pass@k"], platform)
    assert run["results"]["tracing"] == "sdk", run["log_tail"]
    (traced,) = api.call("GET", f"/api/v1/sessions?run={runner_run}")["results"]
    assert traced["llm_call_count"] == 18, traced  # 3 tasks x 3 attempts x (model + judge)
    assert JUDGE_KEY not in run["log_tail"] and "sk-model-e2e" not in run["log_tail"]
    page.goto(f"/traces/sessions/{traced['id']}/")
    expect(page.locator("#llm-call-count")).to_have_text("18")
    expect(page.locator("main")).to_contain_text(runner_run)
    expect(page.locator("#span-tree")).to_contain_text("capital.workflow")

    run = api.finished(harbor_run, 1200)
    assert_succeeded(run, 1.0, platform)
    results = run["results"]
    assert task_results(results) == {"capital": 1.0, "refund": 1.0, "sum": 1.0, "todo": 1.0}
    assert results["tasks"]["sum"] == {"attempts": [1.0], "score": 1.0, "errored": 0}, results
    assert results["errors"] == {} and results["environment"] == "belvedir", results
    assert results["agent"] == "oracle" and results["dataset"] == "tasks"  # its Tasks field
    assert "--env belvedir_harbor.environment:BelvedirEnvironment" in run["log_tail"]
    # The judge and rubric verifiers asked the judge from their task sandboxes, with the run's
    # judge key.
    assert len(judge.requests) == 2, judge.requests
    assert {r["headers"]["Authorization"] for r in judge.requests} == {f"Bearer {JUDGE_KEY}"}
    # Each task ran in a task sandbox of its own, each stopped (the platform's records).
    with psycopg.connect(platform.env["DATABASE_URL"]) as db:
        sandboxes = db.execute(
            "SELECT status FROM runs_tasksandbox WHERE run_id = %s", [harbor_run]
        ).fetchall()
    assert sorted(sandboxes) == [("stopped",)] * 4, sandboxes
    for run_id in (demo_run, plain_run, runner_run, harbor_run):
        wait_for(lambda r=run_id: containers_of(r) == [], 60, f"{run_id}'s containers", platform)

    # The housekeeping cluster's scheduled task former: the SDK session, quiet for 30 s, has
    # its task (every minute).
    sdk_session = f"/api/v1/sessions/{session['id']}"
    tasks = wait_for(
        lambda: api.call("GET", sdk_session)["tasks"], 180, "the SDK session's task", platform
    )
    assert [t["name"] for t in tasks] == ["say hello"], tasks

    page.goto(f"/runs/{harbor_run}/")
    expect(page.locator("main")).to_contain_text("1.000")
    assert page.csp_violations == [], page.csp_violations

    # The demo user signs in; the static files are served.
    login = requests.Session()
    form = login.get(f"{platform.base}/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    signed_in = login.post(
        f"{platform.base}/login/",
        data={
            "username": "demo@belvedir.local",
            "password": "belvedir-demo",
            "csrfmiddlewaretoken": token,
        },
        headers={"Referer": f"{platform.base}/login/"},
        timeout=10,
    )
    assert signed_in.url == f"{platform.base}/" and "Next steps" in signed_in.text
    css = login.get(f"{platform.base}/static/belvedir.css", timeout=10)
    assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")

    # A restart keeps what the users had: both still signed in, the same demo key printed.
    # up.sh killed with SIGKILL runs no trap: its clusters go on until the next start.
    clusters = platform.cluster_groups()
    assert len(clusters) == 2 and all(group_alive(g) for g in clusters), platform.logs()
    platform.kill()
    assert all(group_alive(g) for g in clusters)
    platform.start(tmp_path / "up-again.log")
    assert "stopping the django-q2 clusters an earlier start left running" in platform.output()
    assert not any(group_alive(g) for g in clusters), platform.logs()
    assert set(platform.cluster_groups()).isdisjoint(clusters)
    again = re.search(r"API key\s+(bv_live_\S+)", platform.output())
    assert again and again.group(1) == demo_key, platform.logs()
    harnesses = login.get(f"{platform.base}/harnesses/", timeout=10)
    assert harnesses.url == f"{platform.base}/harnesses/", harnesses.url
    assert "Demo contract harness" in harnesses.text
    page.goto("/traces/")
    expect(page.locator("main")).to_contain_text("e2e-sdk-session")
    assert api.call("GET", f"/api/v1/runs/{harbor_run}")["score"] == 1.0

    # Everything went to the instance's var/, nothing to the checkout's.
    for name in LOGS:
        assert (platform.var / name).stat().st_size > 0, name
    assert (platform.var / "secret_key").stat().st_mode & 0o077 == 0
    assert (platform.var / "demo-harness" / ".git").is_dir()
    after = {name: p.stat().st_mtime for name, p in checkout_var.items() if p.exists()}
    assert after == before, "the test's instance wrote to the checkout's var/"
