"""The runs' django-q2 queue: a run's task goes in, and which runs still have one there.

The reaper requeues a queued run only when its task is gone (a worker crashed with it, or
the enqueue after the launch's commit never happened), not merely because busy workers have
not reached it yet. The ORM broker keeps a task's row until a worker is done with it (locked
while a cluster holds it), so the rows say it. The Redis broker hands tasks to a cluster's
memory, out of its list: there a per-run marker, living as long as django-q2's `retry`, says
the task was handed over recently.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

TASK_FUNC = "runs.jobs.execute_run"


def _is_redis(broker: object) -> bool:
    # Not isinstance: importing the Redis broker imports redis, which only Redis setups need.
    return type(broker).__module__ == "django_q.brokers.redis_broker"


def _marker(run_id: str) -> str:
    return f"belvedir:run-task:{run_id}"


def run_task_enqueue(*, run_id: str, cluster: str | None = None) -> None:
    """Put the run's task on `cluster`'s queue: the runs cluster's (CPU runs), or a GPU type's
    (`gpu-a10g`, read only by GPU worker hosts of that type)."""
    from django_q.tasks import async_task

    cluster = cluster or settings.Q_RUNS_CLUSTER
    broker = get_broker(cluster)
    if _is_redis(broker):
        broker.connection.set(_marker(run_id), "1", ex=Conf.RETRY)
    async_task(
        TASK_FUNC,
        run_id,
        task_name=f"execute {run_id}",
        group="runs",
        cluster=cluster,
        broker=broker,
    )


def _run_of(task: object) -> str | None:
    if isinstance(task, dict) and task.get("func") == TASK_FUNC and task.get("args"):
        return task["args"][0]
    return None


def runs_with_queued_tasks(run_ids: Iterable[str], queues: Iterable[str] = ()) -> set[str]:
    """Those of `run_ids` whose task is still in the broker (waiting, or held by a cluster),
    on the runs cluster's queue or one of `queues` (the GPU queues)."""
    wanted = set(run_ids)
    if not wanted:
        return set()
    keys = sorted({settings.Q_RUNS_CLUSTER, *queues})
    broker = get_broker(settings.Q_RUNS_CLUSTER)
    if isinstance(broker, ORM):
        tasks = (row.task for row in OrmQ.objects.filter(key__in=keys))
    elif _is_redis(broker):
        marked = broker.connection.mget([_marker(run_id) for run_id in sorted(wanted)])
        found = {run_id for run_id, mark in zip(sorted(wanted), marked, strict=True) if mark}
        # django-q2 keeps a queue's tasks in the list `django_q:<queue>:q` (the broker's list_key).
        listed = [
            payload
            for key in keys
            for payload in broker.connection.lrange(get_broker(key).list_key, 0, -1)
        ]
        return found | (wanted & {_run_of(_load(payload)) for payload in listed})
    else:  # a broker we cannot look into: assume the task is there, never pile up duplicates
        return wanted
    return wanted & {_run_of(task) for task in tasks}


def _load(payload: bytes | str) -> object:
    try:
        return SignedPackage.loads(payload.decode() if isinstance(payload, bytes) else payload)
    except Exception:  # a foreign or corrupt payload is not a run's task  # noqa: BLE001
        return None
