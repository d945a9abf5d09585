"""The statistics of a score: its standard error, a 95% interval and the pass@k estimator.

Pure Python (`math` and `statistics`): the sums here are over a run's tasks (at most a few
thousand), so numpy or scipy would add weight and no accuracy.

- The standard error of a mean over tasks is the sample standard deviation over sqrt(n)
  (Miller, "Adding Error Bars to Evals", 2024, eq. 1; Inspect's `stderr()`).
- When tasks come in groups (several questions on one passage, one repository), their scores
  are not independent: the clustered standard error sums the residuals per group first
  (Miller 2024, eq. 4), with the usual G/(G-1) small-sample factor, so that one task per group
  gives the plain standard error exactly.
- The interval is the normal one, mean ± 1.96 SE (Miller 2024, sec. 2), clipped to [0, 1]:
  a score is a share.
- pass@k over n attempts of which c passed is 1 - C(n-c, k)/C(n, k), the unbiased estimator
  of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code"), computed as their
  product form so large n never overflows.
- Two runs over the same tasks are compared by their paired differences d_i = b_i - a_i
  (Miller 2024, sec. 4): the mean difference with the standard error sd(d)/sqrt(n), the normal
  95% interval mean ± 1.96 SE and the two-sided p-value 2·(1 - Φ(|mean|/SE)), all the normal
  approximation, as the score's interval is. The tasks that would be needed to tell a
  difference of the observed size at 80% power (two-sided, α = 0.05) are
  n = ((z_0.975 + z_0.80) · sd(d) / |mean d|)², rounded up: 7.85 · sd² / mean².
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

CONFIDENCE = 0.95
Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)  # 1.959963984540054
POWER = 0.80
Z_POWER = NormalDist().inv_cdf(POWER)  # 0.8416212335729143
TIE = 1e-9  # two task scores closer than this are a tie


@dataclass(frozen=True)
class Estimate:
    mean: float
    stderr: float
    ci_low: float
    ci_high: float
    n: int  # the tasks (units) the mean is over
    clusters: int | None = None  # groups, when clustered


def mean(values: list[float]) -> float:
    if not values:
        raise ValueError("the mean of no values")
    return math.fsum(values) / len(values)


def stderr(values: list[float]) -> float:
    """The standard error of the mean of `values`: sample sd (n-1) / sqrt(n). Needs n >= 2."""
    n = len(values)
    if n < 2:
        raise ValueError("a standard error needs at least 2 values")
    m = mean(values)
    variance = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)


def clustered_stderr(values: list[float], groups: list[str]) -> float:
    """The standard error of the mean of `values`, clustered by `groups` (one label per value):
    sqrt(G/(G-1) * sum_g (sum_{i in g} (x_i - mean))^2) / n. Needs at least 2 groups."""
    if len(values) != len(groups):
        raise ValueError("one group per value")
    sums: dict[str, float] = {}
    m = mean(values)
    for value, group in zip(values, groups, strict=True):
        sums[group] = sums.get(group, 0.0) + (value - m)
    g = len(sums)
    if g < 2:
        raise ValueError("a clustered standard error needs at least 2 groups")
    n = len(values)
    return math.sqrt(g / (g - 1) * math.fsum(s * s for s in sums.values())) / n


def interval(center: float, se: float, *, low: float = 0.0, high: float = 1.0):
    """The 95% interval center ± Z·se, clipped to [low, high]."""
    return max(low, center - Z * se), min(high, center + Z * se)


def estimate(values: list[float], groups: list[str] | None = None) -> Estimate:
    """The mean of `values` with its standard error (clustered when `groups` name at least two
    groups) and its 95% interval. ValueError when there are fewer than 2 values."""
    m = mean(values)
    clusters = None
    if groups is not None and len(set(groups)) >= 2:
        se = clustered_stderr(values, groups)
        clusters = len(set(groups))
    else:
        se = stderr(values)
    low, high = interval(m, se)
    return Estimate(m, se, low, high, len(values), clusters)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of a task with `n` attempts of which `c` passed:
    1 - C(n-c, k)/C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


# --- paired comparison ------------------------------------------------------------------------


@dataclass(frozen=True)
class Paired:
    """B - A over the tasks both runs scored."""

    n: int
    mean: float  # the mean paired difference, B - A
    sd: float  # the sample sd of the differences
    stderr: float
    ci_low: float
    ci_high: float
    p_value: float  # two-sided, normal approximation
    b_won: int
    tied: int
    a_won: int
    tasks_needed: int | None  # at 80% power for a difference this size; None when it is 0

    @property
    def distinguishable(self) -> bool:
        """The 95% interval leaves 0 out (p < 0.05)."""
        return self.ci_low > 0 or self.ci_high < 0


def p_value(mean_value: float, se: float) -> float:
    """The two-sided p-value of mean/se under the normal: 2·(1 - Φ(|z|)); with no spread at
    all, 1 for no difference and 0 for any."""
    if se == 0:
        return 1.0 if mean_value == 0 else 0.0
    return 2.0 * (1.0 - NormalDist().cdf(abs(mean_value) / se))


def tasks_needed(difference: float, sd: float) -> int | None:
    """About how many paired tasks tell `difference` from none at 80% power, two-sided 5%:
    ceil(((Z + Z_POWER) · sd / |difference|)²); None for no difference."""
    if difference == 0:
        return None
    return max(2, math.ceil(((Z + Z_POWER) * sd / abs(difference)) ** 2))


def paired(a: list[float], b: list[float]) -> Paired:
    """The paired comparison of `b` against `a`, one score each per shared task (same order).
    ValueError with fewer than 2 pairs."""
    if len(a) != len(b):
        raise ValueError("one score of each run per task")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    se = stderr(diffs)  # raises for n < 2
    m = mean(diffs)
    sd = se * math.sqrt(n)
    low, high = m - Z * se, m + Z * se
    b_won = sum(d > TIE for d in diffs)
    a_won = sum(d < -TIE for d in diffs)
    return Paired(
        n=n,
        mean=m,
        sd=sd,
        stderr=se,
        ci_low=low,
        ci_high=high,
        p_value=p_value(m, se),
        b_won=b_won,
        tied=n - b_won - a_won,
        a_won=a_won,
        tasks_needed=tasks_needed(m, sd),
    )


def paired_sentence(result: Paired, *, a: str = "A", b: str = "B") -> str:
    """The comparison in a sentence: who is ahead and by how much, or that these tasks cannot
    tell them apart and about how many would."""
    tasks = f"{result.n} shared task{'s' if result.n != 1 else ''}"
    if result.distinguishable:
        ahead, low, high = (b, result.ci_low, result.ci_high)
        if result.mean < 0:
            ahead, low, high = (a, -result.ci_high, -result.ci_low)
        return (
            f"{ahead} is ahead by {abs(result.mean):.3f} "
            f"(95% CI {low:.3f} to {high:.3f}) on {tasks}"
        )
    head = f"{a} and {b} are not distinguishable on these {result.n} tasks"
    if result.tasks_needed is None:
        return f"{head}: their scores are the same on average"
    return (
        f"{head}: about {result.tasks_needed} tasks would be needed to tell "
        f"a difference this size ({abs(result.mean):.3f})"
    )
