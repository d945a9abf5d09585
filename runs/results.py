"""Reading what a harness wrote into results.json beyond the score: its per-task results, for
display (the run page, the compare page); scores/results.py reads them into the score's
uncertainty."""

# Where harnesses put per-task detail, and the keys a task's entry keeps its name and result in.
TASK_KEYS = ("tasks", "per_task", "task_results")
NAME_KEYS = ("name", "task", "task_id", "id")
VALUE_KEYS = ("score", "reward", "passed", "success", "correct", "resolved")

TaskValue = float | bool | str | None


def task_value(entry) -> TaskValue:
    """One task's result as results.json gives it: a number, a boolean, a short text or None."""
    if isinstance(entry, bool):
        return entry
    if isinstance(entry, int | float):
        return float(entry)
    if isinstance(entry, dict):
        for key in VALUE_KEYS:
            if key in entry:
                return task_value(entry[key])
        return None
    return None if entry is None else str(entry)[:200]


def task_results(results) -> dict[str, TaskValue]:
    """Per-task results where the harness wrote them, task name → score or pass/fail.

    Read from the first of `tasks`, `per_task`, `task_results` that is a mapping
    (name → number, boolean or an object with a score) or a list of objects naming their task.
    """
    if not isinstance(results, dict):
        return {}
    for key in TASK_KEYS:
        tasks = results.get(key)
        if isinstance(tasks, dict):
            return {str(name): task_value(entry) for name, entry in tasks.items()}
        if isinstance(tasks, list):
            out: dict[str, TaskValue] = {}
            for index, entry in enumerate(tasks, start=1):
                name = None
                if isinstance(entry, dict):
                    name = next((entry[k] for k in NAME_KEYS if entry.get(k) is not None), None)
                out[str(name if name is not None else f"#{index}")] = task_value(entry)
            return out
    return {}
