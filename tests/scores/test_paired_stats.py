"""scores/stats.py's paired comparison: worked examples computed by hand, the p-value against the
normal's tail, the tasks needed at 80% power, and the sentence either way."""

import math
import random

import pytest

from scores import stats


def test_five_paired_tasks_give_the_hand_computed_difference_error_and_p_value():
    # d = b - a = [0, 1, 0, -1, 1]: mean 0.2; squared deviations 0.04, 0.64, 0.04, 1.44, 0.64
    # sum 2.8; / (n-1) = 0.7 (sd 0.836660); / n = 0.14: SE 0.374166
    result = stats.paired([1, 0, 1, 1, 0], [1, 1, 1, 0, 1])
    assert result.n == 5 and result.mean == pytest.approx(0.2)
    assert result.sd == pytest.approx(math.sqrt(0.7))
    assert result.stderr == pytest.approx(math.sqrt(0.14))
    assert (result.ci_low, result.ci_high) == pytest.approx((-0.533351, 0.933351), abs=1e-6)
    # z = 0.2 / 0.374166 = 0.534522; 2 (1 - Phi(0.534522)) = 0.592980
    assert result.p_value == pytest.approx(0.592980, abs=1e-6)
    assert (result.b_won, result.tied, result.a_won) == (2, 2, 1)
    # (1.959964 + 0.841621)^2 * 0.7 / 0.04 = 7.848880 * 17.5 = 137.36: 138 tasks
    assert result.tasks_needed == 138
    assert not result.distinguishable


def test_fifty_tasks_with_ten_gained_and_two_lost_is_a_difference_of_0_16():
    # d: ten 1s, two -1s, 38 zeros: mean 8/50 = 0.16; sum d^2 = 12
    # var = (12 - 50 * 0.0256) / 49 = 0.218776; SE = sqrt(0.218776 / 50) = 0.066148
    a = [0.0] * 10 + [1.0] * 2 + [0.5] * 38
    b = [1.0] * 10 + [0.0] * 2 + [0.5] * 38
    result = stats.paired(a, b)
    assert result.stderr == pytest.approx(0.066148, abs=1e-6)
    assert (result.ci_low, result.ci_high) == pytest.approx((0.030353, 0.289647), abs=1e-6)
    assert result.p_value == pytest.approx(0.015570, abs=1e-6)  # z = 2.418830
    assert (result.b_won, result.tied, result.a_won) == (10, 38, 2)
    assert result.distinguishable
    assert stats.paired_sentence(result) == (
        "B is ahead by 0.160 (95% CI 0.030 to 0.290) on 50 shared tasks"
    )
    # The other way round A is ahead, its interval turned to read as A's lead.
    assert stats.paired_sentence(stats.paired(b, a)) == (
        "A is ahead by 0.160 (95% CI 0.030 to 0.290) on 50 shared tasks"
    )


def test_a_difference_these_tasks_cannot_tell_says_how_many_tasks_would():
    result = stats.paired([1, 0, 1, 1, 0], [1, 1, 1, 0, 1])
    assert stats.paired_sentence(result, a="run_a", b="run_b") == (
        "run_a and run_b are not distinguishable on these 5 tasks: about 138 tasks would be "
        "needed to tell a difference this size (0.200)"
    )


def test_no_difference_at_all_needs_no_number_of_tasks():
    result = stats.paired([1, 0, 1, 0], [0, 1, 1, 0])
    assert result.mean == 0 and result.p_value == pytest.approx(1.0)
    assert result.tasks_needed is None
    assert stats.paired_sentence(result).endswith("their scores are the same on average")


def test_every_task_gained_the_same_has_no_spread_and_p_zero():
    result = stats.paired([0, 0, 0], [1, 1, 1])
    assert result.stderr == 0 and result.p_value == 0.0 and result.distinguishable


def test_the_p_value_is_the_normal_s_two_sided_tail():
    assert stats.p_value(1.959964, 1.0) == pytest.approx(0.05, abs=1e-6)
    assert stats.p_value(-1.0, 0.5) == pytest.approx(0.045500, abs=1e-6)  # z = 2


def test_the_tasks_needed_at_80_percent_power_follow_the_formula():
    # (1.959964 + 0.841621)^2 = 7.848880; sd 0.5, difference 0.1: 7.848880 * 25 = 196.2 -> 197
    assert stats.Z_POWER == pytest.approx(0.841621, abs=1e-6)
    assert stats.tasks_needed(0.1, 0.5) == 197
    assert stats.tasks_needed(-0.1, 0.5) == 197


def test_a_paired_comparison_needs_two_tasks_and_one_score_of_each_per_task():
    with pytest.raises(ValueError):
        stats.paired([1], [0])
    with pytest.raises(ValueError):
        stats.paired([1, 0], [0])


def test_at_the_tasks_needed_a_true_difference_is_found_about_80_percent_of_the_time():
    # Per task B - A is +1 with p 0.3, -1 with p 0.1, else 0: mean 0.2, sd sqrt(0.4 - 0.04)
    rng = random.Random(27)
    n = stats.tasks_needed(0.2, math.sqrt(0.36))
    assert n == 71  # 7.848880 * 0.36 / 0.04 = 70.6
    found = 0
    for _ in range(2000):
        a, b = [], []
        for _ in range(n):
            u = rng.random()
            a.append(0.0 if u < 0.3 else 1.0 if u < 0.4 else 0.5)
            b.append(1.0 if u < 0.3 else 0.0 if u < 0.4 else 0.5)
        found += stats.paired(a, b).distinguishable
    assert 0.76 <= found / 2000 <= 0.84
