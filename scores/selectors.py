"""Score reads: two runs compared task by task (scores.stats.paired over each run's per-task
results as its grading scores them)."""

from dataclasses import dataclass, field

from runs.models import Run
from scores import stats
from scores.results import task_scores


@dataclass(frozen=True)
class Comparison:
    """Run B against run A over the tasks both scored (scores.stats.paired), and the tasks only
    one of them scored, listed and never compared."""

    a: Run
    b: Run
    rows: list[tuple[str, float, float]]  # each shared task: its name, A's score, B's
    only_a: list[str]
    only_b: list[str]
    paired: stats.Paired | None
    why_none: str = ""  # when there is no paired comparison, why
    notes: list[str] = field(default_factory=list)

    @property
    def sentence(self) -> str:
        if self.paired is None:
            return f"No paired comparison: {self.why_none}."
        return stats.paired_sentence(self.paired) + "."


def paired_comparison(a: Run, b: Run) -> Comparison:
    """B - A task by task, each run's tasks scored as its own grading scores them
    (scores.results.task_scores: errored tasks are out, as they are out of the score)."""
    scores = []
    for run in (a, b):
        scored, _ = task_scores(run.results, grading=run.grading, k=run.attempts)
        scores.append({task.task: task.score for task in scored})
    of_a, of_b = scores
    shared = [name for name in of_a if name in of_b]
    rows = [(name, of_a[name], of_b[name]) for name in shared]
    only_a = [name for name in of_a if name not in of_b]
    only_b = [name for name in of_b if name not in of_a]
    notes = []
    if a.harness_id != b.harness_id:
        notes.append("The runs are of different harnesses: tasks are paired by name.")
    if (a.grading, a.attempts) != (b.grading, b.attempts):
        notes.append(
            f"The runs are graded differently ({a.grading} × {a.attempts}, "
            f"{b.grading} × {b.attempts}): each task is compared as its run scored it."
        )
    why = ""
    for label, run, per_task in (("A", a, of_a), ("B", b, of_b)):
        if not per_task and not why:
            why = f"run {label} ({run.pk}) has no per-task results in its results.json"
    if not why and len(rows) < 2:
        why = (
            "the runs share no scored task"
            if not rows
            else "the runs share only 1 scored task: a paired comparison needs at least 2"
        )
    paired = None
    if not why:
        paired = stats.paired([row[1] for row in rows], [row[2] for row in rows])
    return Comparison(a, b, rows, only_a, only_b, paired, why, notes)
