"""A finished run's score with its error bar: stored at its end from its per-task results, in
the run API and on the run page; a run without per-task results has none and says why."""

import pytest

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
    assert run.score_stderr is None
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert "± 0.069</span>" in page


def test_a_failed_run_has_no_error_bar(owner, make_run):
    run = make_run(status="failed", results=FIFTY_TASKS)
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert "±" not in page and "no error bar" not in page
