"""Fold attempts into scores (BELVEDIR_GRADING): pass@1, pass@k or mean.

The one definition both drivers use: the Belvedir Runner folds its judged answers with it, and
the Harbor driver (drivers/harness-harbor) its trials' rewards; the platform serves this file in
the Harbor driver's repository too (harnesses/drivers.py SHARED)."""

from __future__ import annotations

GRADINGS = ("pass@1", "pass@k", "mean")
PASS_THRESHOLD = 0.5  # an attempt passes when its score is at least this


def task_score(scores: list[float], grading: str, threshold: float) -> float:
    """One task's score from its attempts' scores.

    pass@1: the share of attempts that pass (score >= threshold); pass@k: 1 when any attempt
    passes, else 0; mean: the mean score. A task without attempts scores 0."""
    if not scores:
        return 0.0
    passed = [score >= threshold for score in scores]
    if grading == "pass@k":
        return 1.0 if any(passed) else 0.0
    if grading == "mean":
        return sum(scores) / len(scores)
    return sum(passed) / len(passed)


def task_result(
    scores: list[float], errored: int, grading: str, threshold: float = PASS_THRESHOLD
) -> float | None:
    """One task's score from the attempts that were scored (`task_score`), the `errored` ones
    (never graded: no answer judged, no valid reward) left out; None, not a 0, when every
    attempt errored."""
    if errored and not scores:
        return None
    return task_score(scores, grading, threshold)


def run_score(task_scores: list[float]) -> float:
    """The run's score: the mean of its tasks' scores."""
    return sum(task_scores) / len(task_scores) if task_scores else 0.0


def run_result(task_scores: list[float | None]) -> float | None:
    """The run's score over the tasks that have one (`run_score`); None when every task
    errored."""
    scored = [score for score in task_scores if score is not None]
    if task_scores and not scored:
        return None
    return run_score(scored)


def grading_from(value: str | None) -> str:
    """BELVEDIR_GRADING, normalised (blank → pass@1); ValueError naming it otherwise."""
    value = (value or "").strip().lower() or "pass@1"
    if value not in GRADINGS:
        raise ValueError(f"BELVEDIR_GRADING is {value!r}; it must be pass@1, pass@k or mean.")
    return value
