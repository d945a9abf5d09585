"""Runs that call no model, and the judge a user can leave blank: a Harbor agent that calls no
model needs no key, and judged cards get the operator's default judge, covered."""

import pytest

from runs.models import Run

ROUTER = "http://172.30.0.1:18700/api/v1"  # the upstream fixture's sandbox base


def harbor_harness(owner, agent: str):
    from harnesses.services import harness_create

    env = {"HARBOR_DATASET": "belvedir-sample", "HARBOR_AGENT": agent, "HARBOR_N_TASKS": ""}
    return harness_create(
        project=owner.project,
        created_by=owner.user,
        preset="terminal-bench-2-1",
        name=f"sample with {agent}",
        env=env,
    )


@pytest.mark.docker
@pytest.mark.usefixtures("owner_pays_as_you_go")
@pytest.mark.parametrize("agent", ["oracle", "nop"])
@pytest.mark.parametrize("model", ["oracle", "openai/gpt-4.1-mini", ""])
def test_a_harbor_agent_that_calls_no_model_needs_no_key(owner, upstream, agent, model):
    """Harbor's oracle and nop call no model: a blank key is not refused as uncovered, nothing
    is covered, and MODEL only tags the run."""
    harness = harbor_harness(owner, agent)
    response = owner.api.post(
        "/api/v1/runs", {"harness": harness.pk, "model": model}, format="json"
    )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.model == model and not run.covered and not run.model_covered
    assert run.model_api_base_resolved == "" and run.covered_cap_micros == 0


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_an_agent_that_calls_the_model_still_needs_a_key_or_a_covered_model(
    owner, upstream, make_harness
):
    harness = harbor_harness(owner, "terminus-2")
    response = owner.api.post(
        "/api/v1/runs", {"harness": harness.pk, "model": "oracle"}, format="json"
    )
    assert response.status_code == 400
    assert (
        "The model oracle is not one of the models Belvedir covers"
        in (response.json()["model_api_key"][0])
    )
    # HARBOR_AGENT means nothing to a harness that is not the Harbor driver.
    other = make_harness(env={"HARBOR_AGENT": "oracle"})
    response = owner.api.post(
        "/api/v1/runs", {"harness": other.pk, "model": "oracle"}, format="json"
    )
    assert response.status_code == 400 and "model_api_key" in response.json()
    assert not Run.objects.exists()


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_an_oracle_runs_judge_is_still_checked(owner, upstream):
    """The oracle calls no model, but a judged task's verifier calls the judge."""
    harness = harbor_harness(owner, "oracle")
    response = owner.api.post(
        "/api/v1/runs",
        {"harness": harness.pk, "model": "oracle", "judge_model": "acme/not-covered"},
        format="json",
    )
    assert response.status_code == 400
    assert "The judge acme/not-covered is not one of" in response.json()["judge_api_key"][0]


# --- the judge a user can leave blank ------------------------------------------------------------


def test_the_default_judge_is_a_covered_seeded_model_where_usage_is_covered():
    import os
    import subprocess
    import sys

    def default(**env) -> str:
        code = "import belvedir.settings as s; print(s.BELVEDIR_DEFAULT_JUDGE_MODEL)"
        base = {k: v for k, v in os.environ.items() if not k.startswith("BELVEDIR_ROUTER")}
        base.pop("BELVEDIR_DEFAULT_JUDGE_MODEL", None)
        done = subprocess.run(
            [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert default(BELVEDIR_ROUTER_UPSTREAM_KEY="sk-op") == "openai/gpt-oss-120b"
    assert default() == "openai/gpt-4.1-mini"
    assert default(BELVEDIR_DEFAULT_JUDGE_MODEL="acme/judge") == "acme/judge"


@pytest.mark.django_db
def test_the_seeded_default_judge_is_covered_for_any_project(owner, upstream):
    from runs.model_access import covered_model_check

    owner.project.chinese_models_allowed = False
    entry = covered_model_check(project=owner.project, model="openai/gpt-oss-120b")
    assert entry.model_id == "openai/gpt-oss-120b"


@pytest.mark.usefixtures("owner_pays_as_you_go")
@pytest.mark.parametrize("slug", ["runner", "harbor-runner", "openclaw", "opencode", "pi"])
def test_judged_cards_prefill_the_operators_default_judge(owner, upstream, slug):
    upstream.BELVEDIR_DEFAULT_JUDGE_MODEL = "google/gemma-3-27b-it"
    catalog = owner.api.get("/api/v1/catalog").json()
    cards = {p["slug"]: p for g in catalog["groups"] for p in g["presets"]}
    assert cards[slug]["env"]["JUDGE_MODEL"] == "google/gemma-3-27b-it"
    assert "judged" not in cards[slug]
    body = owner.api.post("/api/v1/harnesses", {"preset": slug}, format="json").json()
    assert body["env"]["JUDGE_MODEL"] == "google/gemma-3-27b-it"
    # The scaffolds grade the same task list with the same judge (their example's rubric
    # task: without one Harbor refuses the run, JUDGE_API_KEY missing); the suites bring
    # their own grading and no judge to prefill.
    assert "JUDGE_MODEL" not in cards["gaia"]["env"]


@pytest.mark.docker
@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_blank_judge_on_a_judged_card_is_the_platform_default_covered(owner, upstream):
    """The user leaves JUDGE_MODEL blank on the harness and at launch, and every key blank:
    the run's judge is the operator's covered default, through the router."""
    upstream.BELVEDIR_DEFAULT_JUDGE_MODEL = "google/gemma-3-27b-it"
    body = owner.api.post("/api/v1/harnesses", {"preset": "runner"}, format="json").json()
    patched = owner.api.patch(f"/api/v1/harnesses/{body['id']}", {"env": {}}, format="json")
    assert patched.status_code == 200 and patched.json()["env"] == {}
    response = owner.api.post(
        "/api/v1/runs",
        {"harness": body["id"], "model": "meta-llama/llama-3.1-8b-instruct"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.judge_model == "google/gemma-3-27b-it" and run.judge_covered
    assert run.judge_api_base_resolved == ROUTER
    # A harness that is not a judged card gets no judge made up for it.
    other = owner.api.post(
        "/api/v1/harnesses", {"preset": "openclaw", "name": "claw"}, format="json"
    ).json()
    response = owner.api.post(
        "/api/v1/runs",
        {"harness": other["id"], "model": "meta-llama/llama-3.1-8b-instruct"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert Run.objects.get(pk=response.json()["id"]).judge_model == ""


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_the_launch_dialog_says_which_judge_where_from_and_whether_it_is_covered(owner, upstream):
    upstream.BELVEDIR_DEFAULT_JUDGE_MODEL = "google/gemma-3-27b-it"
    body = owner.api.post("/api/v1/harnesses", {"preset": "runner"}, format="json").json()

    def judge_line(env: dict) -> str:
        owner.api.patch(f"/api/v1/harnesses/{body['id']}", {"env": env}, format="json")
        page = owner.web.get(f"/runs/launch/{body['id']}/").content.decode()
        start = page.index('id="launch-judge">')
        return page[start + len('id="launch-judge">') : page.index("</p>", start)]

    assert judge_line({}) == (
        "Judge, when JUDGE_MODEL is left blank: <code>google/gemma-3-27b-it</code> (platform "
        "default), covered by Belvedir: leave JUDGE_API_KEY blank"
    )
    line = judge_line({"JUDGE_MODEL": "openai/gpt-4.1-mini"})
    assert "<code>openai/gpt-4.1-mini</code> (harness env), not covered:" in line
    assert "set JUDGE_API_KEY" in line
    line = judge_line({"JUDGE_MODEL": "openai/gpt-4.1-mini", "JUDGE_API_KEY": "sk-own"})
    assert "(harness env), called with the harness&#x27;s own JUDGE_API_KEY" in line
    # A harness without a judge (a suite brings its own grading): no line.
    other = owner.api.post(
        "/api/v1/harnesses", {"preset": "gaia", "name": "suite"}, format="json"
    ).json()
    assert 'id="launch-judge"' not in owner.web.get(f"/runs/launch/{other['id']}/").content.decode()
