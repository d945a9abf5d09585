"""Fold attempts into scores (BELVEDIR_GRADING): pass@1, pass@k or mean."""

from __future__ import annotations

GRADINGS = ("pass@1", "pass@k", "mean")


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


def run_score(task_scores: list[float]) -> float:
    """The run's score: the mean of its tasks' scores."""
    return sum(task_scores) / len(task_scores) if task_scores else 0.0


def grading_from(value: str | None) -> str:
    """BELVEDIR_GRADING, normalised (blank → pass@1); ValueError naming it otherwise."""
    value = (value or "").strip().lower() or "pass@1"
    if value not in GRADINGS:
        raise ValueError(f"BELVEDIR_GRADING is {value!r}; it must be pass@1, pass@k or mean.")
    return value
