"""A finished run's score with its error bar: stored at its end from its per-task results, in
the run API and on the run page; a run without per-task results has none and says why."""

import importlib
import json
import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from runs import services
from runs.models import Run

# 31 of 50 tasks pass: 0.620, standard error sqrt(31*19/50/49)/sqrt(50) = 0.069341
FIFTY_TASKS = {
    "score": 0.62,
    "tasks": {f"t{i:02}": {"score": float(i < 31), "attempts": [float(i < 31)]} for i in range(50)},
}


@pytest.fixture
def finish(make_run):
    def finish(results):
        run = make_run(status="running", attempts=1, grading="pass@1")
        services.run_finish(
            run_id=run.pk, status="succeeded", score=results["score"], results=results
        )
        return Run.objects.get(pk=run.pk)

    return finish


def test_a_run_with_per_task_results_stores_its_standard_error_and_interval(finish):
    run = finish(FIFTY_TASKS)
    assert run.n_tasks == 50
    assert run.score_stderr == pytest.approx(0.069341, abs=1e-6)
    assert (run.score_ci_low, run.score_ci_high) == pytest.approx((0.484093, 0.755907), abs=1e-5)


def test_the_run_api_gives_the_score_with_its_error_bar(owner, readonly, outsider, finish):
    run = finish(FIFTY_TASKS)
    body = owner.api.get(f"/api/v1/runs/{run.pk}").json()
    assert body["score"] == 0.62 and body["n_tasks"] == 50
    assert body["score_stderr"] == pytest.approx(0.069341, abs=1e-6)
    assert body["score_ci_low"] == pytest.approx(0.484093, abs=1e-5)
    assert body["score_ci_high"] == pytest.approx(0.755907, abs=1e-5)
    assert readonly.api.get(f"/api/v1/runs/{run.pk}").json()["score_stderr"] is not None
    assert outsider.api.get(f"/api/v1/runs/{run.pk}").status_code == 404
    listed = owner.api.get("/api/v1/runs").json()["results"][0]
    assert listed["id"] == run.pk and listed["n_tasks"] == 50


def test_the_run_api_gives_no_error_bar_without_per_task_results(owner, finish):
    run = finish({"score": 0.7})
    body = owner.api.get(f"/api/v1/runs/{run.pk}").json()
    assert body["score"] == 0.7
    assert [body[k] for k in ("score_stderr", "score_ci_low", "score_ci_high", "n_tasks")] == [
        None
    ] * 4


def test_the_run_api_says_why_a_run_has_no_error_bar_as_its_page_does(owner, finish):
    without = finish({"score": 0.7})
    one_task = finish({"score": 1.0, "tasks": {"only": 1.0}})
    with_bar = finish(FIFTY_TASKS)
    why = {
        without.pk: "results.json has no per-task results",
        one_task.pk: "only 1 task has a score: an error bar needs at least 2",
        with_bar.pk: "",
    }
    for run_id, note in why.items():
        assert owner.api.get(f"/api/v1/runs/{run_id}").json()["score_interval_note"] == note
        page = owner.web.get(f"/runs/{run_id}/").content.decode()
        assert (f"(no error bar: {note})" in page) == bool(note)
    listed = {
        r["id"]: r["score_interval_note"] for r in owner.api.get("/api/v1/runs").json()["results"]
    }
    assert listed == why


def test_the_run_page_shows_the_score_plus_or_minus_its_standard_error(owner, finish):
    run = finish(FIFTY_TASKS)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        page = owner.web.get(f"/runs/{run.pk}/", **headers).content.decode()
        assert '<strong id="run-score">0.620</strong> <span id="run-score-stderr"' in page
        assert "± 0.069</span>" in page
        assert "(95% CI 0.484–0.756, 50 tasks)" in page
        assert "no error bar" not in page


def test_the_run_page_says_why_a_run_without_per_task_results_has_no_error_bar(owner, finish):
    page = owner.web.get(f"/runs/{finish({'score': 0.7}).pk}/").content.decode()
    assert "±" not in page
    assert "(no error bar: results.json has no per-task results)" in page


def test_a_run_that_ended_before_error_bars_were_stored_shows_one_from_its_results(owner, make_run):
    run = make_run(status="succeeded", score=0.62, results=FIFTY_TASKS, attempts=1)
    without = make_run(status="succeeded", score=0.7, results={"score": 0.7})
    assert run.score_stderr is None
    # what scores' migration 0001 does for such runs: from their stored results
    importlib.import_module("scores.migrations.0001_score_uncertainty_backfill").backfill(
        apps, None
    )
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert "± 0.069</span>" in page
    page = owner.web.get(f"/runs/{without.pk}/").content.decode()
    assert "(no error bar: results.json has no per-task results)" in page


def test_a_failed_run_has_no_error_bar(owner, make_run):
    run = make_run(status="failed", results=FIFTY_TASKS)
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert "±" not in page and "no error bar" not in page


@pytest.fixture
def barred(make_harness, make_run):
    """A harness with a run with an error bar and one without."""
    harness = make_harness(name="barred")
    done = timezone.now()
    scored = {"harness": harness, "model": "m/one", "status": "succeeded"}
    bar = {"score_stderr": 0.1, "score_ci_low": 0.304, "score_ci_high": 0.696, "n_tasks": 25}
    with_bar = make_run(score=0.5, finished_at=done, **scored, **bar)
    without = make_run(score=0.75, finished_at=done - timedelta(days=1), **scored)
    return harness, with_bar, without


def test_my_benchmarks_lists_each_score_with_its_error_bar(owner, barred):
    harness, with_bar, without = barred
    html = owner.web.get("/runs/").content.decode()
    html = html[html.index('id="compare-form"') :]  # the runs table, after the chart's
    row = html[html.index(f">{with_bar.pk}</a>") :].split("</tr>")[0]
    assert "<td>0.500 ± 0.100</td>" in row
    row = html[html.index(f">{without.pk}</a>") :].split("</tr>")[0]
    assert "<td>0.750</td>" in row


def test_the_chart_data_and_its_table_carry_each_runs_interval(owner, barred):
    harness, with_bar, without = barred
    html = owner.web.get(f"/runs/?harness={harness.pk}").content.decode()
    table = html.split('<details class="chart-data" open>')[1].split("</details>")[0]
    assert f"{with_bar.pk}</a></td><td>0.500 ± 0.100 (95% CI 0.304–0.696)</td>" in table
    assert f"{without.pk}</a></td><td>0.750</td>" in table
    data = re.search(r'<script id="runs-chart-data" type="application/json">(.+?)</script>', html)
    points = {p["run"]: p for s in json.loads(data.group(1))["series"] for p in s["points"]}
    assert (points[with_bar.pk]["low"], points[with_bar.pk]["high"]) == (0.304, 0.696)
    assert points[with_bar.pk]["stderr"] == 0.1
    assert points[without.pk]["low"] is None and points[without.pk]["high"] is None


def test_the_harness_pages_runs_and_the_dashboard_show_the_error_bar(owner, barred):
    harness, with_bar, _ = barred
    html = owner.web.get(
        "/runs/", {"harness": harness.pk, "fragment": "harness-runs"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<td>0.500 ± 0.100</td>" in html  # its recent runs
    assert f'data-latest="{with_bar.pk}">0.500 ± 0.100</a>' in html  # its chart's latest
    dashboard = owner.web.get("/runs/?fragment=dashboard", HTTP_HX_REQUEST="true")
    assert "<strong>0.500 ± 0.100</strong>" in dashboard.content.decode()
