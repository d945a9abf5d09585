"""A warm task sandbox still starting when its run's create comes (harbor/warm.py): the create
takes it and waits for it instead of starting a container of its own, it counts against
HARBOR_CONCURRENCY from then on, and one that never comes up is given back and the create
starts its own. Real Docker, gVisor."""

import dataclasses
import threading
import time

import pytest
from django.db import connection

from belvedir.errors import LimitReached
from belvedir.sandbox_config import get_backend
from harbor import services, warm
from harbor.containers import container_spec
from harbor.models import TaskSandbox
from sandboxes.base import SandboxError
from tests.helpers.task_sandboxes import (
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    task_containers,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


@pytest.fixture
def cached(managed, task_images):
    """A run whose task image is cached, no task sandbox alive; (run, client, context, image)."""
    run, client = managed
    context = context_tar(fresh_dockerfile())
    first = client.create("first", context).json()
    task_images.add(first["image"])
    assert client.stop(first["id"]).status == 200
    return run, client, context, first["image"]


def starting(run, image: str) -> TaskSandbox:
    """A warm row of `image` whose container has not come up yet, as warm.make leaves it."""
    return TaskSandbox.objects.create(
        run=run, name=warm.WARM_NAME, image=image, cached=True, status=TaskSandbox.Status.WARM
    )


def come_up_later(row: TaskSandbox, delay: float) -> threading.Thread:
    """Its container started after `delay` seconds, as warm.make's thread does."""

    def start() -> None:
        try:
            time.sleep(delay)
            backend = get_backend()
            spec = container_spec(run=row.run, sandbox_id=row.pk, image=row.image)
            handle = backend.launch(
                dataclasses.replace(spec, workdir=backend.image_workdir(row.image))
            )
            backend.detach(handle)
            TaskSandbox.objects.filter(pk=row.pk).update(container_id=handle.id)
        finally:
            connection.close()

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    return thread


def test_a_create_waits_for_its_runs_warm_task_sandbox_still_starting_instead_of_another(
    cached,
):
    run, client, context, image = cached
    row = starting(run, image)
    coming = come_up_later(row, 1.0)

    taken = client.create("task-a", context).json()
    coming.join(60)

    assert taken["id"] == row.pk and taken["status"] == "running" and taken["name"] == "task-a"
    (container,) = task_containers(run.pk)  # no container of its own
    assert container.id == TaskSandbox.objects.get(pk=row.pk).container_id
    assert client.exec_lines(taken["id"], "true")[-1]["exit_code"] == 0


def test_a_taken_warm_task_sandbox_still_starting_counts_against_harbor_concurrency(owner):
    run, _ = make_managed_run(owner, env={"HARBOR_CONCURRENCY": "1"})
    image = "belvedir-task:cached"
    starting(run, image)

    taken = services._reserve(run=run, name="task-a", warm_image=image)

    assert taken.status == "warm" and taken.name == "task-a"
    with pytest.raises(LimitReached):  # HARBOR_CONCURRENCY 1: its slot is held
        services._reserve(run=run, name="task-b")


def test_a_warm_task_sandbox_that_never_comes_up_is_given_back_and_the_create_starts_its_own(
    cached, monkeypatch
):
    run, client, context, image = cached
    row = starting(run, image)
    monkeypatch.setattr(warm, "WAIT_SECONDS", 0.5)

    own = client.create("task-a", context).json()

    assert own["id"] != row.pk and own["status"] == "running"
    back = TaskSandbox.objects.get(pk=row.pk)
    assert back.status == "warm" and back.name == warm.WARM_NAME  # untaken, not counted


def test_a_warm_task_sandbox_whose_start_fails_leaves_no_row_to_wait_for(cached, monkeypatch):
    run, _, _, image = cached

    def refuse(self, spec):
        raise SandboxError("the engine refused")

    monkeypatch.setattr(type(get_backend()), "launch", refuse)

    assert warm.make(run=run, images=[image]) == []
    assert not TaskSandbox.objects.filter(run=run, status="warm").exists()
