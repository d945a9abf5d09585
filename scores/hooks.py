"""What scores adds to a run's life (runs/hooks.py; scores/apps.py registers it once, from its
AppConfig.ready): a run stored as succeeded stores with it its score's standard error, 95%
interval and n_tasks, or why it has none, computed from its per-task results."""

from __future__ import annotations

from runs import hooks
from runs.models import Run
from scores.results import score_uncertainty


def run_succeeding(run_id: str, score: float | None, results) -> dict:
    """The score's interval fields from the run's per-task results, as the run's grading and
    attempts (its k) compute the score."""
    found = Run.objects.filter(pk=run_id).values_list("grading", "attempts").first()
    if found is None:
        return {}
    grading, attempts = found
    return score_uncertainty(results, score=score, grading=grading, k=attempts).fields()


def register() -> None:
    if run_succeeding not in hooks.run_succeeding:
        hooks.run_succeeding.append(run_succeeding)
