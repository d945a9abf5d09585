"""Scores over time (harness page, My Benchmarks) and runs compared side by side."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.results import task_results
from runs.selectors import score_series

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def chart_data(html: str, data_id: str) -> dict:
    (raw,) = re.findall(rf'<script id="{data_id}" type="application/json">(.*?)</script>', html)
    return json.loads(raw)


@pytest.fixture
def scored(make_harness, make_run):
    """Two harnesses; three scored runs of "alpha" with two models, one of "beta", one failed."""
    alpha, beta = make_harness(name="alpha"), make_harness(name="beta")
    now = timezone.now()

    def run(harness, model, score, days_ago, status="succeeded"):
        done = now - timedelta(days=days_ago)
        return make_run(
            harness=harness,
            model=model,
            score=score,
            status=status,
            created_at=done - timedelta(minutes=5),
            started_at=done - timedelta(minutes=4),
            finished_at=done,
        )

    runs = {
        "a1": run(alpha, "m/one", 0.5, 3),
        "a2": run(alpha, "m/one", 0.75, 2),
        "a3": run(alpha, "m/two", 0.25, 1),
        "b1": run(beta, "m/one", 1.0, 1),
        "failed": run(alpha, "m/one", None, 0, status="failed"),
    }
    return alpha, beta, runs


def test_a_harness_s_series_has_one_line_per_model_oldest_point_first(owner, scored):
    alpha, _, runs = scored
    series = score_series(project=owner.project, harness=alpha.pk)
    assert [s["label"] for s in series] == ["m/one", "m/two"]
    one = series[0]
    assert [r.pk for r in one["runs"]] == [runs["a1"].pk, runs["a2"].pk]
    assert one["best"] == runs["a2"] and one["latest"] == runs["a2"]


def test_across_harnesses_each_series_is_a_harness_and_model(owner, scored):
    series = score_series(project=owner.project)
    assert [s["label"] for s in series] == ["alpha · m/one", "alpha · m/two", "beta · m/one"]


def test_the_harness_runs_fragment_carries_the_chart_data_and_a_best_latest_summary(owner, scored):
    alpha, _, runs = scored
    html = owner.web.get("/runs/", {"harness": alpha.pk, "fragment": "harness-runs"}, **HX)
    html = html.content.decode()

    data = chart_data(html, "harness-chart-data")
    assert [s["label"] for s in data["series"]] == ["m/one", "m/two"]
    assert [(p["run"], p["y"]) for p in data["series"][0]["points"]] == [
        (runs["a1"].pk, 0.5),
        (runs["a2"].pk, 0.75),
    ]
    assert data["series"][0]["points"][0]["url"] == f"/runs/{runs['a1'].pk}/"
    assert 'canvas data-score-chart="harness-chart-data"' in html
    # The summary: best and latest per model, with three decimals.
    assert f'data-best="{runs["a2"].pk}"><strong>0.750</strong>' in html
    assert f'data-latest="{runs["a3"].pk}">0.250<' in html
    # Readable without scripts: the points as a table, open until the chart draws.
    assert '<details class="chart-data" open>' in html and "0.500" in html


def test_my_benchmarks_charts_every_harness_and_follows_the_filters(owner, scored):
    alpha, _, _ = scored
    html = owner.web.get("/runs/").content.decode()
    labels = [s["label"] for s in chart_data(html, "runs-chart-data")["series"]]
    assert labels == ["alpha · m/one", "alpha · m/two", "beta · m/one"]
    assert "vendor/chartjs/chart-4.6.1.umd.min.js" in html and "score_charts.js" in html

    table = owner.web.get("/runs/", {"model": "m/two", "fragment": "table"}, **HX)
    labels = [s["label"] for s in chart_data(table.content.decode(), "runs-chart-data")["series"]]
    assert labels == ["alpha · m/two"]


def test_the_chart_table_lists_every_point_with_its_date_series_link_and_score(owner, scored):
    _, _, runs = scored
    html = owner.web.get("/runs/").content.decode()
    table = html.split('<details class="chart-data" open>')[1].split("</details>")[0]
    rows = re.findall(r'<tr><td>([^<]+)</td><td>([^<]+)</td><td><a class="mono" href="([^"]+)">'
                      r"([^<]+)</a></td><td>([^<]+)</td></tr>", table)  # fmt: skip
    a2 = runs["a2"]
    local = timezone.localtime(a2.finished_at).strftime("%Y-%m-%d %H:%M")
    assert (local, "alpha · m/one", f"/runs/{a2.pk}/", a2.pk, "0.750") in rows
    assert len(rows) == 4  # the four scored runs, not the failed one


def test_the_harness_page_loads_the_vendored_chart_library_not_a_cdn(owner, make_harness):
    html = owner.web.get(f"/harnesses/{make_harness(name='h').pk}/").content.decode()
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert "/static/vendor/chartjs/chart-4.6.1.umd.min.js" in scripts
    assert all(src.startswith("/static/") for src in scripts)


def test_with_no_scored_runs_the_chart_says_so(owner, make_harness):
    harness = make_harness(name="fresh")
    html = owner.web.get("/runs/", {"harness": harness.pk, "fragment": "harness-runs"}, **HX)
    assert "No scored runs yet" in html.content.decode()


# --- per-task results ----------------------------------------------------------------------


def test_per_task_results_are_read_from_a_mapping_or_a_list():
    assert task_results({"tasks": {"t1": 1, "t2": False, "t3": {"reward": 0.5}}}) == {
        "t1": 1.0,
        "t2": False,
        "t3": 0.5,
    }
    listed = {"per_task": [{"name": "a", "passed": True}, {"task_id": "b", "score": 0.2}, 7]}
    assert task_results(listed) == {"a": True, "b": 0.2, "#3": 7.0}


def test_results_without_per_task_detail_have_no_task_rows():
    assert task_results({"score": 0.5, "passed": 17}) == {}
    assert task_results(None) == {}
    assert task_results({"tasks": "not a list"}) == {}


# --- compare -----------------------------------------------------------------------------


def test_two_runs_compare_side_by_side_with_score_duration_and_tasks(owner, make_run):
    now = timezone.now()
    first = make_run(
        status="succeeded",
        score=0.5,
        model="m/one",
        results={"score": 0.5, "tasks": {"add": 1, "sub": 0}},
        started_at=now - timedelta(seconds=30),
        finished_at=now,
    )
    second = make_run(
        status="succeeded",
        score=1,
        model="m/two",
        results={
            "score": 1,
            "tasks": [{"name": "add", "passed": True}, {"name": "mul", "score": 1}],
        },
    )
    response = owner.web.get("/runs/compare/", {"run": [first.pk, second.pk]})
    html = response.content.decode()
    assert response.status_code == 200
    score_row = html[html.index('id="compare-score"') :].split("</tr>")[0]
    assert re.findall(r"<strong>([^<]+)</strong>", score_row) == ["0.500", "1.000"]
    assert "30.0 s" in html and "m/one" in html and "m/two" in html
    tasks = html[html.index('id="compare-tasks"') :]
    assert "Per task (3 tasks)" in tasks
    add = tasks[tasks.index(">add<") :].split("</tr>")[0]
    assert "1.000" in add and ">pass<" in add
    mul = tasks[tasks.index(">mul<") :].split("</tr>")[0]
    assert re.findall(r"<td>(.*?)</td>", mul) == ['<span class="muted">—</span>', "1.000"]
    # Tokens come from the traces app, one partial per run.
    for run in (first, second):
        assert f'hx-get="/traces/?run={run.pk}&amp;fragment=run-tokens"' in html


def test_comparing_needs_at_least_two_runs(owner, make_run):
    run = make_run(status="succeeded", score=0.5)
    response = owner.web.get("/runs/compare/", {"run": [run.pk]})
    assert response.status_code == 400
    assert "Pick between 2 and 8 runs to compare." in response.content.decode()


def test_an_outsider_cannot_compare_another_organization_s_runs(owner, outsider, make_run):
    runs = [make_run(status="succeeded", score=0.5).pk for _ in range(2)]
    assert outsider.web.get("/runs/compare/", {"run": runs}).status_code == 404


def test_a_read_only_member_can_compare(readonly, make_run):
    runs = [make_run(status="succeeded", score=0.5).pk for _ in range(2)]
    assert readonly.web.get("/runs/compare/", {"run": runs}).status_code == 200


def test_my_benchmarks_offers_a_compare_checkbox_per_run(owner, make_run):
    run = make_run(status="succeeded", score=0.5)
    html = owner.web.get("/runs/").content.decode()
    assert '<form method="get" action="/runs/compare/" id="compare-form">' in html
    assert f'<input type="checkbox" name="run" value="{run.pk}"' in html
