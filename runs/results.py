"""Reading what a harness wrote into results.json beyond the score, for display."""

# Where harnesses put per-task detail, and the keys a task's entry keeps its name and result in.
TASK_KEYS = ("tasks", "per_task", "task_results")
NAME_KEYS = ("name", "task", "task_id", "id")
VALUE_KEYS = ("score", "reward", "passed", "success", "correct", "resolved")

TaskValue = float | bool | str | None


def _value(entry) -> TaskValue:
    if isinstance(entry, bool):
        return entry
    if isinstance(entry, int | float):
        return float(entry)
    if isinstance(entry, dict):
        for key in VALUE_KEYS:
            if key in entry:
                return _value(entry[key])
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
            return {str(name): _value(entry) for name, entry in tasks.items()}
        if isinstance(tasks, list):
            out: dict[str, TaskValue] = {}
            for index, entry in enumerate(tasks, start=1):
                name = None
                if isinstance(entry, dict):
                    name = next((entry[k] for k in NAME_KEYS if entry.get(k) is not None), None)
                out[str(name if name is not None else f"#{index}")] = _value(entry)
            return out
    return {}
