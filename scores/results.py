"""A run's per-task results (runs/results.py reads them from results.json) as the score's
grading scores them, and the score's standard error and 95% interval over them
(scores/stats.py), or why there is none."""

import math
from dataclasses import dataclass

from runs.results import NAME_KEYS, TASK_KEYS, task_value
from scores import stats

# Where an attempt keeps whether it passed, when it is an object.
ATTEMPT_KEYS = ("score", "reward", "passed", "success", "correct", "resolved")
PASS_THRESHOLD = 0.5  # the Runner's and the Harbor driver's default (belvedir_runner.grading)
MIN_TASKS = 2
SCORE_MISMATCH = 0.0005  # less than the page's last shown digit


@dataclass(frozen=True)
class TaskScore:
    task: str
    score: float
    group: str | None = None


def _number(value) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _attempt_scores(attempts) -> list[float]:
    """The scores of a task's graded attempts (numbers, booleans or objects with a score);
    errored ones (no score) left out."""
    scores = []
    for attempt in attempts if isinstance(attempts, list) else []:
        if isinstance(attempt, dict):
            if "errored" in attempt:
                continue
            attempt = next((attempt[k] for k in ATTEMPT_KEYS if k in attempt), None)
        value = _number(attempt)
        if value is not None:
            scores.append(value)
    return scores


def _fold(scores: list[float], *, grading: str, k: int, threshold: float) -> float:
    """A task's score from its attempts, as belvedir_runner.grading folds them; pass@k with the
    unbiased estimator (scores.stats.pass_at_k) when there are more attempts than k."""
    passed = sum(score >= threshold for score in scores)
    if grading == "mean":
        return stats.mean(scores)
    if grading == "pass@k":
        return stats.pass_at_k(len(scores), passed, min(k, len(scores)))
    return passed / len(scores)


def task_scores(results, *, grading: str, k: int) -> tuple[list[TaskScore], bool]:
    """Each scored task's score and group from results.json's `tasks` (or `per_task`,
    `task_results`) in any of its forms: {task: {"score", "attempts", "group"}}, a list of such
    objects naming their task, or {task: score}. Tasks without a score (errored) and those
    listed under `errored` are left out, as they are out of the run's score. The second value
    says whether the pass@k estimator rescored a task (it had more attempts than k)."""
    if not isinstance(results, dict):
        return [], False
    threshold = _number(results.get("pass_threshold"))
    threshold = PASS_THRESHOLD if threshold is None else threshold
    errored = results.get("errored") if isinstance(results.get("errored"), dict) else {}
    entries: list[tuple[str, object]] = []
    for key in TASK_KEYS:
        tasks = results.get(key)
        if isinstance(tasks, dict):
            entries = [(str(name), entry) for name, entry in tasks.items()]
            break
        if isinstance(tasks, list):
            for index, entry in enumerate(tasks, start=1):
                name = None
                if isinstance(entry, dict):
                    name = next((entry[k] for k in NAME_KEYS if entry.get(k) is not None), None)
                entries.append((str(name if name is not None else f"#{index}"), entry))
            break
    out, rescored = [], False
    for name, entry in entries:
        if name in errored:
            continue
        group = None
        if isinstance(entry, dict):
            group = None if entry.get("group") is None else str(entry["group"])
            attempts = _attempt_scores(entry.get("attempts"))
            value = task_value(entry)
            score = _number(value) if not isinstance(value, str) else None
            if attempts and (score is None or (grading == "pass@k" and len(attempts) > k)):
                rescored = rescored or (grading == "pass@k" and len(attempts) > k)
                score = _fold(attempts, grading=grading, k=k, threshold=threshold)
        else:
            score = _number(entry)
        if score is not None:
            out.append(TaskScore(name, score, group))
    return out, rescored


@dataclass(frozen=True)
class ScoreUncertainty:
    estimate: stats.Estimate | None
    why_none: str = ""  # when there is no estimate, why, in a sentence
    n_tasks: int | None = None  # the scored tasks, when there are per-task results

    def fields(self) -> dict:
        """As the run stores it (Run.score_stderr, score_ci_low, score_ci_high, n_tasks and
        score_interval_note, the why-none)."""
        est = self.estimate
        return {
            "score_stderr": est.stderr if est else None,
            "score_ci_low": est.ci_low if est else None,
            "score_ci_high": est.ci_high if est else None,
            "n_tasks": self.n_tasks,
            "score_interval_note": self.why_none,
        }


def score_uncertainty(results, *, score: float | None, grading: str, k: int) -> ScoreUncertainty:
    """The score's standard error and 95% interval over the run's per-task results (clustered
    by `group` when the tasks name at least two), or why there is none."""
    scored, rescored = task_scores(results, grading=grading, k=k)
    if score is None:
        return ScoreUncertainty(None, "the run has no score", len(scored) or None)
    if not scored:
        return ScoreUncertainty(None, "results.json has no per-task results")
    if len(scored) < MIN_TASKS:
        return ScoreUncertainty(
            None,
            f"only {len(scored)} task has a score: an error bar needs at least {MIN_TASKS}",
            len(scored),
        )
    groups = [task.group for task in scored]
    est = stats.estimate(
        [task.score for task in scored],
        [g if g is not None else f"task:{t.task}" for g, t in zip(groups, scored, strict=True)]
        if any(g is not None for g in groups)
        else None,
    )
    if not rescored and abs(est.mean - score) > SCORE_MISMATCH:
        return ScoreUncertainty(
            None,
            f"the per-task results average {est.mean:.3f}, not the score {score:.3f}: "
            "the harness's score is not their mean",
            len(scored),
        )
    return ScoreUncertainty(est, n_tasks=len(scored))
