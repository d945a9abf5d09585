"""Two runs compared task by task (issue 27, item 3): GET /api/v1/runs/compare?runs=A,B and the
compare page. The numbers are those of tests/scores/test_paired_stats.py's worked examples."""

import pytest

pytestmark = pytest.mark.django_db

# 50 tasks: B gains t00-t09, loses t10-t11, ties on the other 38 (both 0.5 there).
A_TASKS = {f"t{i:02}": (0.0 if i < 10 else 1.0 if i < 12 else 0.5) for i in range(50)}
B_TASKS = {f"t{i:02}": (1.0 if i < 10 else 0.0 if i < 12 else 0.5) for i in range(50)}


def results(tasks: dict) -> dict:
    return {"score": sum(tasks.values()) / len(tasks), "tasks": tasks}


@pytest.fixture
def pair(make_run):
    def pair(a_tasks=A_TASKS, b_tasks=B_TASKS, **b_fields):
        a = make_run(status="succeeded", score=0.5, model="m/a", results=results(a_tasks))
        b = make_run(
            status="succeeded",
            score=0.5,
            model="m/b",
            results=results(b_tasks) if b_tasks is not None else {"score": 0.5},
            **b_fields,
        )
        return a, b

    return pair


def compare(client, a, b):
    return client.api.get("/api/v1/runs/compare", {"runs": f"{a.pk},{b.pk}"})


def test_the_api_gives_the_mean_paired_difference_its_interval_p_value_and_wins(owner, pair):
    a, b = pair()
    response = compare(owner, a, b)
    assert response.status_code == 200
    body = response.json()
    assert body["shared_tasks"] == 50
    assert body["difference"] == pytest.approx(0.16)
    assert body["stderr"] == pytest.approx(0.066148, abs=1e-6)
    assert (body["ci_low"], body["ci_high"]) == pytest.approx((0.030353, 0.289647), abs=1e-6)
    assert body["p_value"] == pytest.approx(0.015570, abs=1e-6)
    assert (body["b_won"], body["tied"], body["a_won"]) == (10, 38, 2)
    assert body["distinguishable"] is True and body["tasks_needed"] == 68
    assert body["summary"] == "B is ahead by 0.160 (95% CI 0.030 to 0.290) on 50 shared tasks."
    assert body["a"]["id"] == a.pk and body["b"]["model"] == "m/b"
    assert body["a"]["tasks_only_here"] == [] and body["b"]["tasks_only_here"] == []
    assert body["tasks"][0] == {"task": "t00", "a": 0.0, "b": 1.0, "difference": 1.0}
    assert body["why_none"] == "" and body["notes"] == []


def test_the_order_given_is_a_then_b(owner, pair):
    a, b = pair()
    body = compare(owner, b, a).json()
    assert body["difference"] == pytest.approx(-0.16)
    assert body["summary"].startswith("A is ahead by 0.160")


def test_partly_shared_tasks_are_compared_over_the_shared_ones_and_the_rest_listed(owner, pair):
    a_tasks = {"t1": 1.0, "t2": 0.0, "t3": 1.0, "t4": 1.0, "t5": 0.0, "only-a": 1.0}
    b_tasks = {"only-b": 0.0, "t1": 1.0, "t2": 1.0, "t3": 1.0, "t4": 0.0, "t5": 1.0}
    a, b = pair(a_tasks, b_tasks)
    body = compare(owner, a, b).json()
    assert body["shared_tasks"] == 5
    assert body["a"]["tasks_only_here"] == ["only-a"]
    assert body["b"]["tasks_only_here"] == ["only-b"]
    assert [t["task"] for t in body["tasks"]] == ["t1", "t2", "t3", "t4", "t5"]
    assert body["difference"] == pytest.approx(0.2)
    assert body["p_value"] == pytest.approx(0.592980, abs=1e-6)
    assert (body["b_won"], body["tied"], body["a_won"]) == (2, 2, 1)
    assert body["distinguishable"] is False and body["tasks_needed"] == 138
    assert body["summary"] == (
        "A and B are not distinguishable on these 5 tasks: about 138 tasks would be needed "
        "to tell a difference this size (0.200)."
    )


def test_a_run_without_per_task_results_says_why_there_is_no_comparison(owner, pair):
    a, b = pair(b_tasks=None)
    response = compare(owner, a, b)
    assert response.status_code == 200
    body = response.json()
    assert body["why_none"] == f"run B ({b.pk}) has no per-task results in its results.json"
    assert body["summary"] == f"No paired comparison: {body['why_none']}."
    assert body["difference"] is None and body["p_value"] is None and body["tasks"] == []
    assert body["shared_tasks"] == 0 and len(body["a"]["tasks_only_here"]) == 50


def test_runs_sharing_one_task_have_no_comparison_and_say_so(owner, pair):
    a, b = pair({"x": 1.0, "y": 0.0}, {"x": 0.0, "z": 1.0})
    body = compare(owner, a, b).json()
    assert body["why_none"] == (
        "the runs share only 1 scored task: a paired comparison needs at least 2"
    )


def test_different_gradings_are_compared_with_a_note(owner, pair):
    a, b = pair(grading="mean", attempts=3)
    body = compare(owner, a, b).json()
    assert body["notes"] == [
        "The runs are graded differently (pass@1 × 1, mean × 3): each task is compared as "
        "its run scored it."
    ]


def test_an_outsider_gets_404_and_a_read_only_member_the_comparison(
    owner, readonly, outsider, pair, make_run
):
    a, b = pair()
    assert compare(outsider, a, b).status_code == 404
    assert compare(readonly, a, b).json()["shared_tasks"] == 50
    # One run of the caller's and one of another organization's is a 404 too.
    other = make_run(project=outsider.project, status="succeeded", results=results(B_TASKS))
    assert compare(owner, a, other).status_code == 404


@pytest.mark.parametrize("runs", [None, "", "run_x", "run_x,run_x", "a,b,c", ","])
def test_anything_but_two_run_ids_is_a_400_naming_runs(owner, runs):
    params = {} if runs is None else {"runs": runs}
    response = owner.api.get("/api/v1/runs/compare", params)
    assert response.status_code == 400
    assert response.json() == {"runs": ["Give two different run ids to compare: runs=A,B."]}


# --- the compare page ---------------------------------------------------------------------


def page(client, *runs):
    response = client.web.get("/runs/compare/", {"run": [run.pk for run in runs]})
    assert response.status_code == 200
    return response.content.decode()


def section(html: str) -> str:
    return html[html.index('id="compare-paired"') :].split("</section>")[0]


def field(html: str, name: str) -> str:
    return html[html.index(f'data-field="{name}">') :].split(">", 1)[1].split("</td>")[0]


def test_the_compare_page_of_two_runs_shows_the_paired_comparison(owner, pair):
    a, b = pair()
    shown = section(page(owner, a, b))
    assert f'A is <a class="mono" href="/runs/{a.pk}/">{a.pk}</a> (m/a)' in shown
    assert (
        '<p id="compare-paired-summary"><strong>B is ahead by 0.160 (95% CI 0.030 to 0.290) '
        "on 50 shared tasks.</strong></p>"
    ) in shown
    assert field(shown, "difference") == "+0.160"
    assert field(shown, "stderr") == "0.066"
    assert field(shown, "ci") == "+0.030 to +0.290"
    assert field(shown, "p_value") == "0.016"
    assert field(shown, "wins") == "B won 10, tied 38, A won 2 of 50"
    assert 'data-field="tasks_needed"' not in shown  # told apart already
    assert "Normal approximation" in shown and "± 1.96 standard errors" in shown
    assert 'id="compare-unshared"' not in shown
    # The side-by-side columns say which run is A and which B.
    head = page(owner, a, b).split('id="compare-table"')[1].split("</thead>")[0]
    assert head.index(">A</span>") < head.index(a.pk) < head.index(">B</span>") < head.index(b.pk)


def test_the_page_lists_the_unshared_tasks_and_how_many_tasks_would_be_needed(owner, pair):
    a_tasks = {"t1": 1.0, "t2": 0.0, "t3": 1.0, "t4": 1.0, "t5": 0.0, "only-a": 1.0}
    b_tasks = {"only-b": 0.0, "t1": 1.0, "t2": 1.0, "t3": 1.0, "t4": 0.0, "t5": 1.0}
    a, b = pair(a_tasks, b_tasks)
    shown = section(page(owner, a, b))
    assert "A and B are not distinguishable on these 5 tasks: about 138 tasks" in shown
    assert field(shown, "p_value") == "0.593"
    assert field(shown, "tasks_needed") == ("about 138 to tell a difference this size at 80% power")
    assert '<p data-only="a">Only A (1 task): <span class="mono">only-a</span></p>' in shown
    assert '<p data-only="b">Only B (1 task): <span class="mono">only-b</span></p>' in shown


def test_the_page_says_why_a_run_without_per_task_results_has_no_comparison(owner, pair):
    a, b = pair(b_tasks=None)
    shown = section(page(owner, a, b))
    assert (
        f"No paired comparison: run B ({b.pk}) has no per-task results in its results.json."
    ) in shown
    assert 'id="compare-paired-table"' not in shown


def test_three_runs_side_by_side_have_no_paired_comparison_but_say_it_takes_two(
    owner, pair, make_run
):
    a, b = pair()
    html = page(owner, a, b, make_run(status="succeeded", score=0.5))
    assert 'id="compare-paired"' not in html and "data-side" not in html
    assert 'id="compare-paired-hint"' in html


def test_the_paired_page_is_scoped_like_the_compare_page(owner, readonly, outsider, pair):
    a, b = pair()
    assert outsider.web.get("/runs/compare/", {"run": [a.pk, b.pk]}).status_code == 404
    assert 'id="compare-paired-summary"' in page(readonly, a, b)
