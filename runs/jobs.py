"""django-q2 entry points: thin, take ids, safe to run twice."""

from runs import executor, reaper


def execute_run(run_id: str) -> str:
    return executor.execute_run(run_id)


def reap() -> dict:
    return reaper.reap()
