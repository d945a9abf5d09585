"""scores/stats.py: worked examples computed by hand, pass@k against its closed form, and the
95% interval's coverage in a seeded simulation."""

import itertools
import math
import random

import pytest

from scores import stats


def test_the_standard_error_of_five_pass_fail_tasks_is_the_hand_computed_one():
    # mean 0.6; squared deviations 0.16 x3 + 0.36 x2 = 1.2; / (n-1) = 0.3; / n = 0.06
    assert stats.stderr([1, 0, 1, 1, 0]) == pytest.approx(math.sqrt(0.06))
    assert stats.stderr([1, 0, 1, 1, 0]) == pytest.approx(0.244949, abs=1e-6)


def test_the_interval_is_the_mean_plus_or_minus_1_96_standard_errors_clipped_to_0_1():
    est = stats.estimate([1, 0, 1, 1, 0])
    assert stats.Z == pytest.approx(1.959964, abs=1e-6)
    assert est.mean == pytest.approx(0.6)
    assert est.ci_low == pytest.approx(0.6 - 1.959964 * 0.244949, abs=1e-5)  # 0.11991
    assert est.ci_high == 1.0  # 1.08009 clipped: a score is a share
    assert est.n == 5 and est.clusters is None


def test_a_score_of_0_62_on_50_tasks_reads_0_620_plus_or_minus_0_069():
    # 31 of 50 pass: sd = sqrt(31*19/50/49) = 0.49031; / sqrt(50) = 0.069341
    est = stats.estimate([1.0] * 31 + [0.0] * 19)
    assert est.stderr == pytest.approx(0.069341, abs=1e-6)
    assert (est.ci_low, est.ci_high) == pytest.approx((0.484093, 0.755907), abs=1e-5)


def test_two_groups_that_agree_inside_have_a_wider_clustered_error_than_the_plain_one():
    # mean 0.5; residual sums per group +1 and -1; sqrt(2/1 * 2) / 4 = 0.5
    values, groups = [1, 1, 0, 0], ["a", "a", "b", "b"]
    assert stats.clustered_stderr(values, groups) == pytest.approx(0.5)
    # unclustered: 4 x 0.25 / 3 / 4 = 1/12
    assert stats.stderr(values) == pytest.approx(math.sqrt(1 / 12))
    est = stats.estimate(values, groups)
    assert est.stderr == pytest.approx(0.5) and est.clusters == 2


def test_groups_that_disagree_inside_have_a_smaller_clustered_error():
    # mean 0.5; residual sums per group 0 and 0: no between-group spread at all
    assert stats.clustered_stderr([1, 0, 1, 0], ["a", "a", "b", "b"]) == pytest.approx(0.0)


def test_one_task_per_group_gives_exactly_the_plain_standard_error():
    values = [0.9, 0.1, 0.5, 0.7, 0.3, 1.0, 0.0]
    groups = [f"g{i}" for i in range(len(values))]
    assert stats.clustered_stderr(values, groups) == pytest.approx(stats.stderr(values))


def test_a_single_group_falls_back_to_the_plain_standard_error():
    est = stats.estimate([1, 0, 1], ["only"] * 3)
    assert est.clusters is None and est.stderr == pytest.approx(stats.stderr([1, 0, 1]))


def test_fewer_than_two_values_have_no_standard_error():
    with pytest.raises(ValueError):
        stats.stderr([1.0])
    with pytest.raises(ValueError):
        stats.estimate([])


def test_pass_at_k_worked_examples():
    # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # 1 - C(7,5)/C(10,5) = 1 - 21/252
    assert stats.pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    # pass@1 is the share that passed; pass@n is whether any did
    assert stats.pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert stats.pass_at_k(4, 1, 4) == 1.0 and stats.pass_at_k(4, 0, 4) == 0.0


def test_pass_at_k_equals_the_closed_form_and_the_share_of_k_subsets_with_a_pass():
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                closed = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert stats.pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12), (n, c, k)
    passed = [True] * 3 + [False] * 4
    subsets = list(itertools.combinations(passed, 3))
    share = sum(any(s) for s in subsets) / len(subsets)
    assert stats.pass_at_k(7, 3, 3) == pytest.approx(share)


def test_pass_at_k_does_not_overflow_at_large_n():
    assert stats.pass_at_k(2000, 1, 1000) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 4, 1)


# The simulations are seeded, so they give the same numbers every time; the bands are where a
# correct 95% interval lands (binomial sd of a coverage over 2,000 runs: 0.005).
SIMULATED_RUNS = 2000


def test_the_95_percent_interval_covers_the_true_mean_in_95_percent_of_2000_simulated_runs():
    rng = random.Random(27)
    true_rate, n_tasks = 0.62, 100
    covered = 0
    for _ in range(SIMULATED_RUNS):
        scores = [1.0 if rng.random() < true_rate else 0.0 for _ in range(n_tasks)]
        est = stats.estimate(scores)
        covered += est.ci_low <= true_rate <= est.ci_high
    assert 0.93 <= covered / SIMULATED_RUNS <= 0.965


def _grouped_run(rng, true_mean, groups, per_group):
    """Tasks in groups that share a difficulty: a group's tasks pass together more often."""
    values, labels = [], []
    for g in range(groups):
        rate = min(1.0, max(0.0, rng.gauss(true_mean, 0.25)))
        for _ in range(per_group):
            values.append(1.0 if rng.random() < rate else 0.0)
            labels.append(f"g{g}")
    return values, labels


def test_clustered_intervals_cover_grouped_tasks_where_the_plain_ones_do_not():
    rng = random.Random(2024)
    # the truncated gauss keeps the group rates' mean at 0.5 by symmetry
    true_mean, clustered, plain = 0.5, 0, 0
    for _ in range(SIMULATED_RUNS):
        values, labels = _grouped_run(rng, true_mean, groups=40, per_group=8)
        est = stats.estimate(values, labels)
        clustered += est.ci_low <= true_mean <= est.ci_high
        low, high = stats.interval(est.mean, stats.stderr(values))
        plain += low <= true_mean <= high
    assert 0.925 <= clustered / SIMULATED_RUNS <= 0.965
    assert plain / SIMULATED_RUNS < 0.85  # the plain error ignores the groups: far too narrow
