"""The home page's runs parts (the dashboard and the "launch a run" step) and the launch
dialog's suggestions."""

import re

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_dashboard_shows_runs_in_flight_latest_scores_and_recent_failures(owner, make_run):
    make_run(harness_name="Busy", status="running", model="vendor/busy")
    make_run(harness_name="Good", status="succeeded", score=0.75)
    make_run(harness_name="Broken", status="failed", notes=["belvedir: the repo is gone"])
    response = owner.web.get("/runs/?fragment=dashboard", **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    flight = re.search(r'id="dashboard-in-flight">(.*?)</div>', html, re.S).group(1)
    scores = re.search(r'id="dashboard-scores">(.*?)</div>', html, re.S).group(1)
    failures = re.search(r'id="dashboard-failures">(.*?)</div>', html, re.S).group(1)
    assert "Busy" in flight and "vendor/busy" in flight and "Good" not in flight
    assert "0.750" in scores and "Good" in scores
    assert "Broken" in failures and "the repo is gone" in failures


def test_the_dashboard_shows_only_the_current_projects_runs(owner, outsider, make_run):
    make_run(project=outsider.project, harness_name="Theirs", status="running")
    html = owner.web.get("/runs/?fragment=dashboard", **HTMX).content.decode()
    assert "Theirs" not in html and "Nothing running." in html


def test_the_run_step_is_ticked_after_the_first_run(owner, make_run):
    url = "/runs/?fragment=onboarding-step"
    assert 'class="step" data-step="run"' in owner.web.get(url, **HTMX).content.decode()
    make_run(status="queued")
    assert 'class="step done" data-step="run"' in owner.web.get(url, **HTMX).content.decode()


def test_the_launch_dialog_offers_the_models_used_before_and_placeholders(owner, harness, make_run):
    make_run(model="vendor/old-model")
    make_run(model="vendor/new-model")
    make_run(model="vendor/new-model")
    html = owner.web.get(f"/runs/launch/{harness.pk}/").content.decode()
    assert re.search(r'<input[^>]*name="model"[^>]*list="models-used"', html)
    options = re.findall(r'<option value="(vendor/[\w-]+)">', html)
    assert options == ["vendor/new-model", "vendor/old-model"]
    assert 'placeholder="e.g. openai/gpt-4.1-mini' in html
    assert 'placeholder="blank: inferred from the model id' in html


def test_models_of_another_project_are_not_offered(owner, outsider, harness, make_run):
    make_run(project=outsider.project, model="vendor/secret-model")
    html = owner.web.get(f"/runs/launch/{harness.pk}/").content.decode()
    assert "vendor/secret-model" not in html and 'list="models-used"' not in html
