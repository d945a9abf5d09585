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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

CONFIDENCE = 0.95
Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)  # 1.959963984540054


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
