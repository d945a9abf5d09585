"""A leaderboard per benchmark (issue 27, item 4): a harness's and an environment's models
ranked by their latest or best score with 95% intervals, ties by the rank rule
(scores/leaderboard.py), runs of different versions, Tasks fields, gradings or attempts never
ranked together; the page partial, its page without scripts, and the API."""

from datetime import timedelta
from hashlib import md5

import pytest
from django.utils import timezone

from harnesses.models import Environment, Harness
from runs.models import Run
from runs.services import run_launch
from tests.helpers.seed import assert_bounded

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
NOW = timezone.now()
EDITED_TASKS = '[{"prompt": "new"}]'


def interval(score, half):
    return {
        "score": score,
        "score_stderr": half / 1.96,
        "score_ci_low": score - half,
        "score_ci_high": score + half,
        "n_tasks": 50,
    }


@pytest.fixture
def harness(owner):
    return Harness.objects.create(
        project=owner.project, name="bench", repo_url="x", run_command="x"
    )


@pytest.fixture
def scored(make_run, harness):
    """A run of `harness` that succeeded `ago` hours ago."""

    def scored(model, ago=1, harness=harness, **fields):
        values = {"status": "succeeded", "finished_at": NOW - timedelta(hours=ago), **fields}
        return make_run(harness=harness, model=model, **values)

    return scored


@pytest.fixture
def four(scored):
    """A 0.80 ± 0.10 and B 0.75 ± 0.10 overlap (rank 1, tied); C 0.50 ± 0.10 lies below both,
    and D at 0.45 without an interval lies below A's and B's but inside C's (rank 3, tied).
    A also has an older, better run: 0.95 ± 0.05."""
    return {
        "a_best": scored("m/a", ago=5, **interval(0.95, 0.05)),
        "a": scored("m/a", ago=1, **interval(0.80, 0.10)),
        "b": scored("m/b", ago=2, **interval(0.75, 0.10)),
        "c": scored("m/c", ago=3, **interval(0.50, 0.10)),
        "d": scored(
            "m/d", ago=4, score=0.45, score_interval_note="results.json has no per-task results"
        ),
    }


def ranks(body):
    return [(row["model"], row["rank"], row["tied"], row["run"]) for row in body["rows"]]


def test_the_api_ranks_each_model_by_its_latest_score_and_marks_overlapping_ranks_tied(
    owner, harness, four
):
    body = owner.api.get(f"/api/v1/harnesses/{harness.pk}/leaderboard").json()
    assert body["pick"] == "latest"
    assert ranks(body) == [
        ("m/a", 1, True, four["a"].pk),
        ("m/b", 1, True, four["b"].pk),
        ("m/c", 3, True, four["c"].pk),
        ("m/d", 3, True, four["d"].pk),
    ]
    a, b, c, d = body["rows"]
    assert (a["score"], a["score_ci_low"], a["score_ci_high"]) == pytest.approx((0.8, 0.7, 0.9))
    assert a["runs"] == 2 and b["runs"] == 1
    assert a["compare"] is None
    assert b["compare"] == f"/api/v1/runs/compare?runs={four['a'].pk},{four['b'].pk}"
    assert d["score_stderr"] is None
    assert d["score_interval_note"] == "results.json has no per-task results"
    assert "wholly above" in body["rank_rule"]
    group = body["group"]
    assert (group["grading"], group["attempts"], group["environment_version"]) == (
        "pass@1",
        1,
        None,
    )
    assert group["runs"] == 5 and group["models"] == 4 and body["groups"] == [group]


def test_best_ranks_each_model_by_its_best_run(owner, harness, four):
    body = owner.api.get(f"/api/v1/harnesses/{harness.pk}/leaderboard?pick=best").json()
    # A's 0.95 ± 0.05 lies wholly above B's 0.65-0.85: no tie at the top any more
    assert ranks(body) == [
        ("m/a", 1, False, four["a_best"].pk),
        ("m/b", 2, False, four["b"].pk),
        ("m/c", 3, True, four["c"].pk),
        ("m/d", 3, True, four["d"].pk),
    ]


def test_a_model_whose_interval_clears_every_other_leads_alone(owner, harness, scored):
    top = scored("m/top", **interval(0.9, 0.05))
    scored("m/low", **interval(0.5, 0.05))
    body = owner.api.get(f"/api/v1/harnesses/{harness.pk}/leaderboard").json()
    assert ranks(body)[0] == ("m/top", 1, False, top.pk)
    assert [row["rank"] for row in body["rows"]] == [1, 2]


def test_other_gradings_attempts_and_tasks_fields_are_boards_of_their_own(owner, harness, scored):
    pass_at_1 = scored("m/a", ago=3, **interval(0.6, 0.1))
    scored("m/b", ago=4, **interval(0.5, 0.1))
    pass_at_k = scored("m/a", ago=1, grading="pass@k", attempts=3, **interval(0.9, 0.1))
    edited_md5 = md5(EDITED_TASKS.encode()).hexdigest()
    edited = scored("m/c", ago=2, tasks_md5=edited_md5, score=0.99)
    url = f"/api/v1/harnesses/{harness.pk}/leaderboard"
    body = owner.api.get(url).json()
    # the newest run's group by default: pass@k x 3, alone
    assert body["group"]["label"] == "own tasks · pass@k × 3 attempts"
    assert ranks(body) == [("m/a", 1, False, pass_at_k.pk)]
    labels = {g["label"]: g["key"] for g in body["groups"]}
    assert len(body["groups"]) == 3
    (plain,) = [g["key"] for g in body["groups"] if g["grading"] == "pass@1" and g["runs"] == 2]
    body = owner.api.get(f"{url}?group={plain}").json()
    assert [row["model"] for row in body["rows"]] == ["m/a", "m/b"]
    assert body["rows"][0]["run"] == pass_at_1.pk
    assert edited.pk not in {row["run"] for row in body["rows"]}
    # two Tasks fields under pass@1 x 1: each label names its own (and the day its runs began)
    edited_label = f"own tasks · pass@1 × 1 attempt · tasks {edited_md5[:7]}"
    assert sum(label.startswith(edited_label + ", run from ") for label in labels) == 1
    assert sum(", run from " in label for label in labels) == 2


def test_an_environment_board_ranks_per_harness_and_model_and_never_mixes_versions(owner, scored):
    env = Environment.objects.create(project=owner.project, name="tasks", version=2)
    v1 = Harness.objects.create(
        project=owner.project, name="v1 runner", repo_url="x", run_command="x",
        environment=env, environment_version=1,
    )  # fmt: skip
    v2 = Harness.objects.create(
        project=owner.project, name="v2 runner", repo_url="x", run_command="x",
        environment=env, environment_version=2,
    )  # fmt: skip
    v2b = Harness.objects.create(
        project=owner.project, name="v2 scaffold", repo_url="x", run_command="x",
        environment=env, environment_version=2,
    )  # fmt: skip
    old = scored("m/a", ago=9, harness=v1, **interval(0.99, 0.01))
    new = scored("m/a", ago=1, harness=v2, **interval(0.70, 0.05))
    other = scored("m/a", ago=2, harness=v2b, **interval(0.50, 0.05))
    scored("m/a", ago=1, harness=None, **interval(1.0, 0.0))  # no harness: on no board
    body = owner.api.get(f"/api/v1/environments/{env.pk}/leaderboard").json()
    assert body["group"]["environment_version"] == 2
    assert body["group"]["label"] == "v2 · pass@1 × 1 attempt"
    assert [(r["harness_name"], r["rank"], r["run"]) for r in body["rows"]] == [
        ("v2 runner", 1, new.pk),
        ("v2 scaffold", 2, other.pk),
    ]
    (v1_group,) = [g for g in body["groups"] if g["environment_version"] == 1]
    body = owner.api.get(f"/api/v1/environments/{env.pk}/leaderboard?group={v1_group['key']}")
    assert [r["run"] for r in body.json()["rows"]] == [old.pk]


def test_the_leaderboard_apis_answer_outsiders_404_readers_200_and_bad_input_400(
    owner, readonly, outsider, harness, four
):
    env = Environment.objects.create(project=owner.project, name="tasks")
    for url in (
        f"/api/v1/harnesses/{harness.pk}/leaderboard",
        f"/api/v1/environments/{env.pk}/leaderboard",
    ):
        assert outsider.api.get(url).status_code == 404
        assert readonly.api.get(url).status_code == 200
        for query, field in (("?pick=worst", "pick"), ("?group=nope", "group")):
            response = owner.api.get(url + query)
            assert response.status_code == 400 and field in response.content.decode()
    assert owner.api.get("/api/v1/harnesses/har_nope/leaderboard").status_code == 404
    assert owner.api.get(f"/api/v1/environments/{env.pk}/leaderboard").json() == {
        "pick": "latest",
        "group": None,
        "groups": [],
        "rank_rule": owner.api.get(f"/api/v1/harnesses/{harness.pk}/leaderboard").json()[
            "rank_rule"
        ],
        "rows": [],
    }


def test_the_harness_and_environment_pages_pull_their_leaderboard_in(owner, harness):
    env = Environment.objects.create(project=owner.project, name="tasks")
    env.versions.create(number=1, name="tasks", tasks=[])
    page = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    url = f"/scores/harnesses/{harness.pk}/leaderboard/"
    assert f'<div id="leaderboard" hx-get="{url}" hx-trigger="load"' in page
    assert f'<a href="{url}">' in page  # without scripts: the board's own page
    page = owner.web.get(f"/environments/{env.pk}/").content.decode()
    assert f'hx-get="/scores/environments/{env.pk}/leaderboard/"' in page


def test_the_partial_ranks_with_ties_links_runs_and_compares_with_the_leader(owner, harness, four):
    url = f"/scores/harnesses/{harness.pk}/leaderboard/"
    partial = owner.web.get(url, **HTMX).content.decode()
    assert partial.lstrip().startswith('<section id="leaderboard">')
    assert "<html" not in partial
    assert "Ranked together: <strong>own tasks · pass@1 × 1 attempt</strong> · 5 runs" in partial
    assert '<tr data-model="m/a" data-rank="1" data-tied>' in partial
    assert '<tr data-model="m/c" data-rank="3" data-tied>' in partial
    assert "0.800 ± 0.051" in partial and "0.700–0.900" in partial
    assert "none: results.json has no per-task results" in partial
    assert f'href="/runs/{four["b"].pk}/"' in partial
    compare = f"/runs/compare/?run={four['a'].pk}&amp;run={four['b'].pk}"
    assert f'href="{compare}"' in partial
    assert partial.count("compare with the leader") == 3
    assert "wholly above" in partial
    shown = owner.web.get(compare.replace("&amp;", "&")).content.decode()
    assert "shared tasks" in shown or "No paired comparison" in shown
    best = owner.web.get(url + "?pick=best", **HTMX).content.decode()
    assert '<tr data-model="m/a" data-rank="1">' in best
    assert 'id="leaderboard-best" aria-current="true"' in best
    page = owner.web.get(url).content.decode()  # without HTMX: a page of its own
    assert "<html" in page and '<section id="leaderboard">' in page
    assert f'<a href="/harnesses/{harness.pk}/">← bench</a>' in page


def test_the_partial_and_page_answer_outsiders_404_and_readers_200(
    owner, readonly, outsider, harness
):
    env = Environment.objects.create(project=owner.project, name="tasks")
    for url in (
        f"/scores/harnesses/{harness.pk}/leaderboard/",
        f"/scores/environments/{env.pk}/leaderboard/",
    ):
        for headers in ({}, HTMX):
            assert outsider.web.get(url, **headers).status_code == 404
            response = readonly.web.get(url, **headers)
            assert response.status_code == 200
            assert "No succeeded run with a score yet." in response.content.decode()


def test_a_failed_or_unscored_run_is_on_no_board(owner, harness, scored):
    scored("m/failed", status="failed", score=0.9)
    scored("m/unscored", score=None)
    body = owner.api.get(f"/api/v1/harnesses/{harness.pk}/leaderboard").json()
    assert body["rows"] == [] and body["group"] is None
    assert Run.objects.filter(harness=harness).count() == 2


def test_the_leaderboards_take_a_fixed_number_of_queries(
    owner, harness, scored, django_assert_max_num_queries
):
    env = Environment.objects.create(project=owner.project, name="tasks")
    for i in range(30):  # 6 models, 5 runs each, three gradings: an N+1 would show
        made = Harness.objects.create(
            project=owner.project, name=f"h{i}", repo_url="x", run_command="x",
            environment=env, environment_version=1 + i % 2,
        )  # fmt: skip
        for h in (harness, made):
            scored(
                f"m/{i % 6}",
                ago=i,
                harness=h,
                grading=["pass@1", "mean"][i % 2],
                **interval(0.5, 0.1),
            )
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    pages = [
        (f"/scores/harnesses/{harness.pk}/leaderboard/", HTMX, 7),
        (
            f"/scores/harnesses/{harness.pk}/leaderboard/?pick=best",
            {},
            8,
        ),  # the page: its menu reads the projects
        (f"/scores/environments/{env.pk}/leaderboard/", HTMX, 7),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    apis = [
        (f"/api/v1/harnesses/{harness.pk}/leaderboard", 4),
        (f"/api/v1/environments/{env.pk}/leaderboard?pick=best", 4),
    ]
    assert_bounded(owner.api, apis, django_assert_max_num_queries)
    body = owner.api.get(f"/api/v1/harnesses/{harness.pk}/leaderboard").json()
    assert len(body["groups"]) == 2 and len(body["rows"]) == 3


@pytest.mark.docker
def test_a_launch_stores_the_md5_of_the_tasks_field_it_ran(
    owner, make_harness, django_capture_on_commit_callbacks
):
    harness = make_harness(tasks=EDITED_TASKS)
    with django_capture_on_commit_callbacks(execute=False):
        run = run_launch(project=owner.project, harness=harness, created_by=owner.user)
    assert Run.objects.get(pk=run.pk).tasks_md5 == md5(EDITED_TASKS.encode()).hexdigest()
    assert Run(harness_snapshot={"tasks": ""}).tasks_md5 == md5(b"").hexdigest()
