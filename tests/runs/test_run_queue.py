"""Which runs still have their task in the broker: the reaper requeues only the others.

The ORM broker is the one the tests' settings use (tests/runs/test_reaper.py runs it with a
real busy cluster); the Redis broker is checked here against the local Redis, on keys of
this test's own.
"""

import uuid

import pytest
from django_q.brokers.redis_broker import Redis

from runs import queue


@pytest.fixture
def redis_broker(monkeypatch):
    broker = Redis(list_key=f"belvedir-test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setattr(queue, "get_broker", lambda list_key=None: broker)
    yield broker
    broker.connection.delete(broker.list_key)


def test_with_redis_a_run_is_queued_while_its_task_is_listed_or_recently_handed_over(
    redis_broker,
):
    waiting, taken, lost = (f"run_test{uuid.uuid4().hex[:8]}" for _ in range(3))
    for run_id in (waiting, taken, lost):
        queue.run_task_enqueue(run_id=run_id)
    try:
        assert redis_broker.connection.llen(redis_broker.list_key) == 3
        # A cluster took `taken` off the list (into its memory); `lost`'s cluster died long ago.
        redis_broker.connection.lrem(redis_broker.list_key, 0, _payload_of(redis_broker, taken))
        redis_broker.connection.lrem(redis_broker.list_key, 0, _payload_of(redis_broker, lost))
        redis_broker.connection.delete(queue._marker(lost))
        # `waiting` has been listed longer than its marker lives: the list alone says it waits.
        redis_broker.connection.delete(queue._marker(waiting))

        assert queue.runs_with_queued_tasks([waiting, taken, lost]) == {waiting, taken}
        assert redis_broker.connection.ttl(queue._marker(taken)) > 0  # it does not live forever
    finally:
        redis_broker.connection.delete(*(queue._marker(r) for r in (waiting, taken, lost)))


def _payload_of(broker: Redis, run_id: str) -> bytes:
    (payload,) = [
        p
        for p in broker.connection.lrange(broker.list_key, 0, -1)
        if queue._run_of(queue._load(p)) == run_id
    ]
    return payload
