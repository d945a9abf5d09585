"""scores/results.py reads results.json's per-task results in each of their forms into the
score's standard error and interval (scores/stats.py), or says why there is none."""

import math

import pytest

from scores import stats
from scores.results import TaskScore, score_uncertainty, task_scores

# The Belvedir Runner's form: a list of tasks naming their id, each with judged attempts.
RUNNER = {
    "score": 0.5,
    "grading": "pass@1",
    "attempts": 2,
    "pass_threshold": 0.5,
    "tasks": [
        {"id": "add", "score": 1.0, "passed": 2, "attempts": [{"score": 1.0}, {"score": 0.9}]},
        {"id": "sub", "score": 0.5, "passed": 1, "attempts": [{"score": 1.0}, {"score": 0.0}]},
        {"id": "mul", "score": 0.0, "passed": 0, "attempts": [{"score": 0.0}, {"score": 0.2}]},
        {"id": "div", "score": None, "attempts": [{"errored": "judge unreachable"}]},
    ],
    "errored": {"div": "judge unreachable"},
}
# The Harbor driver's form: an object keyed by task, attempts as rewards.
HARBOR = {
    "score": 0.5,
    "grading": "pass@1",
    "tasks": {
        "add": {"attempts": [1.0, 1.0], "score": 1.0, "errored": 0},
        "sub": {"attempts": [1.0, 0.0], "score": 0.5, "errored": 0},
        "mul": {"attempts": [0.0, 0.0], "score": 0.0, "errored": 0},
        "div": {"attempts": [], "score": None, "errored": 2},
    },
    "errored": {"div": "no reward"},
}


def test_the_runners_and_the_harbor_drivers_tasks_read_the_same():
    expected = [TaskScore("add", 1.0), TaskScore("sub", 0.5), TaskScore("mul", 0.0)]
    assert task_scores(RUNNER, grading="pass@1", k=2) == (expected, False)
    assert task_scores(HARBOR, grading="pass@1", k=2) == (expected, False)


def test_plain_task_scores_and_booleans_read_as_scores():
    results = {"score": 0.5, "tasks": {"add": True, "sub": False, "mul": 1, "div": 0}}
    scores, _ = task_scores(results, grading="pass@1", k=1)
    assert [t.score for t in scores] == [1.0, 0.0, 1.0, 0.0]


def test_a_list_of_rewards_naming_their_task_reads_too():
    results = {"tasks": [{"name": "add", "reward": 1}, {"task": "sub", "reward": 0}]}
    assert task_scores(results, grading="pass@1", k=1)[0] == [
        TaskScore("add", 1.0),
        TaskScore("sub", 0.0),
    ]


def test_a_task_without_a_score_is_folded_from_its_attempts_by_the_grading():
    results = {"tasks": {"t": {"attempts": [1.0, 0.0, 0.0, 1.0]}}}
    assert task_scores(results, grading="pass@1", k=4)[0][0].score == 0.5
    assert task_scores(results, grading="mean", k=4)[0][0].score == 0.5
    assert task_scores(results, grading="pass@k", k=4)[0][0].score == 1.0


def test_pass_at_k_with_more_attempts_than_k_uses_the_unbiased_estimator():
    # 5 attempts, 2 passed, k = 2: 1 - C(3,2)/C(5,2) = 0.7, not the harness's "any passed" 1.0
    results = {"tasks": {"t": {"score": 1.0, "attempts": [1, 1, 0, 0, 0]}}}
    scores, rescored = task_scores(results, grading="pass@k", k=2)
    assert scores[0].score == pytest.approx(0.7) and rescored


def test_the_runners_run_has_the_standard_error_of_its_three_scored_tasks():
    got = score_uncertainty(RUNNER, score=0.5, grading="pass@1", k=2)
    # deviations 0.5, 0, -0.5: 0.5 / 2 = 0.25 variance; / 3 tasks
    assert got.estimate.stderr == pytest.approx(math.sqrt(0.25 / 3))
    assert got.estimate.n == 3 and got.why_none == ""


def test_groups_cluster_the_standard_error():
    tasks = {f"q{i}": {"score": float(i < 4), "group": "p1" if i < 4 else "p2"} for i in range(8)}
    got = score_uncertainty({"tasks": tasks}, score=0.5, grading="pass@1", k=1)
    assert got.estimate.clusters == 2
    assert got.estimate.stderr == pytest.approx(
        stats.clustered_stderr([1.0] * 4 + [0.0] * 4, ["p1"] * 4 + ["p2"] * 4)
    )


@pytest.mark.parametrize(
    ("results", "score", "why"),
    [
        ({"score": 0.7}, 0.7, "results.json has no per-task results"),
        ({"tasks": {"only": 1.0}}, 1.0, "only 1 task has a score"),
        ({"tasks": {"a": 1, "b": 0}}, 0.9, "the per-task results average 0.500, not the score"),
        ({"tasks": {"a": 1, "b": 0}}, None, "the run has no score"),
    ],
)
def test_a_run_without_usable_per_task_results_has_no_interval_and_says_why(results, score, why):
    got = score_uncertainty(results, score=score, grading="pass@1", k=1)
    assert got.estimate is None and why in got.why_none
