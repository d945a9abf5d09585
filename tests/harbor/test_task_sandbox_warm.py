"""Warm task sandboxes (harbor/warm.py): a managed Harbor run's task containers started ahead
from its harness's last run's images. The attack first: a warm task sandbox is never handed
to another run, of the same organization or another, nor to a forced build; then its own
run's create takes it, and it never outlives its run. One still starting when the create
comes: the create takes it and waits for it instead of starting a container of its own, it
counts against HARBOR_CONCURRENCY from then on, and one that never comes up is given back."""

import dataclasses
import threading

import pytest
from django.db import connection

from belvedir.errors import LimitReached
from belvedir.sandbox_config import get_backend
from harbor import services, warm
from harbor.containers import container_spec
from harbor.models import TaskSandbox
from harbor.services import task_sandboxes_stop_for_run
from runs.models import Run, Status
from sandboxes.base import SandboxError
from tests.helpers.task_sandboxes import (
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    managed_client,
    task_containers,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


@pytest.fixture
def built(owner, sandbox_settings, task_images):
    """A run A with a cached task image and a warm task sandbox of it; (run, client, context,
    image, the warm row)."""
    run, client = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    context = context_tar(fresh_dockerfile())
    first = client.create("first", context).json()
    task_images.add(first["image"])
    assert client.stop(first["id"]).status == 200
    (row,) = warm.make(run=run, images=[first["image"]])
    row.refresh_from_db()
    assert row.status == "warm" and row.container_id and row.run_id == run.pk
    return run, client, context, first["image"], row


def warm_container_running(row) -> bool:
    return any(
        c.id == row.container_id and c.status == "running" for c in task_containers(row.run_id)
    )


def test_a_warm_task_sandbox_is_never_handed_to_another_run_or_organization(
    built, owner, outsider, sandbox_settings, task_images
):
    run, _, context, image, row = built
    base_url = sandbox_settings.BELVEDIR_SANDBOX_BASE_URL

    # Another run of the same organization, the same environment: the same image, its own
    # fresh container.
    other_run, other = managed_client(owner, base_url)
    theirs = other.create("same-org", context).json()
    assert theirs["image"] == image and theirs["id"] != row.pk
    (container,) = task_containers(other_run.pk)
    assert container.id != row.container_id
    # Another organization's run: its own image (keyed by the organization) and container.
    stranger_run, stranger = managed_client(outsider, base_url)
    strangers = stranger.create("other-org", context).json()
    task_images.add(strangers["image"])
    assert strangers["image"] != image
    assert {c.id for c in task_containers(stranger_run.pk)} & {row.container_id} == set()
    # Not even a row or a container of theirs names run A's warm one.
    assert TaskSandbox.objects.get(pk=row.pk).status == "warm"
    assert not TaskSandbox.objects.filter(container_id=row.container_id).exclude(pk=row.pk)
    assert warm_container_running(row)
    # Nor is it reachable by its id with their keys.
    body, headers = b'{"command": "true"}', {"Content-Type": "application/json"}
    for client in (other, stranger):
        assert client.call("POST", f"/task-sandboxes/{row.pk}/exec", body, headers).status == 404
        assert client.stop(row.pk).status == 404
    assert warm_container_running(row)


def test_a_forced_build_never_takes_a_warm_task_sandbox(built):
    run, client, context, _, row = built

    forced = client.create_forced("forced", context).json()

    assert forced["id"] != row.pk and forced["cached"] is False
    assert TaskSandbox.objects.get(pk=row.pk).status == "warm"


def test_its_own_runs_create_takes_it_running_and_the_runs_end_removes_the_rest(built):
    run, client, context, image, row = built
    (second,) = warm.make(run=run, images=[image])

    taken = client.create("task-a", context).json()

    assert taken["id"] == row.pk and taken["status"] == "running" and taken["name"] == "task-a"
    assert taken["cached"] is True and taken["started_at"]
    lines = client.exec_lines(taken["id"], "pwd; id -u")
    out = "".join(line.get("data", "") for line in lines if line.get("stream") == "stdout")
    assert out == "/app\n0\n" and lines[-1]["exit_code"] == 0  # its image's workdir, root
    assert TaskSandbox.objects.get(pk=second.pk).status == "warm"
    Run.objects.filter(pk=run.pk).update(status=Status.SUCCEEDED)

    task_sandboxes_stop_for_run(run_id=run.pk)

    assert task_containers(run.pk) == []
    # The one never taken ran nothing: its row is gone, nothing was charged for it.
    assert not TaskSandbox.objects.filter(pk=second.pk).exists()
    assert TaskSandbox.objects.get(pk=row.pk).status == "stopped"


def test_no_warm_task_sandbox_for_a_run_that_is_not_running(owner, sandbox_settings):
    run, _ = make_managed_run(owner)
    Run.objects.filter(pk=run.pk).update(status=Status.CANCELLED)

    assert warm.make(run=run, images=["belvedir-sandbox:latest"]) == []
    assert task_containers(run.pk) == []


def test_the_images_are_the_harness_last_runs_capped_at_its_concurrency(owner, sandbox_settings):
    run, _ = make_managed_run(owner, env={"HARBOR_CONCURRENCY": "3"})
    earlier = Run.objects.create(
        project=run.project, harness=run.harness, harness_snapshot=run.harness_snapshot,
        status=Status.SUCCEEDED, created_at=run.created_at.replace(year=2020),
    )  # fmt: skip
    for image in ["belvedir-task:a", "belvedir-task:a", "belvedir-task:b", "belvedir-task:c"]:
        TaskSandbox.objects.create(run=earlier, name="t", image=image, status="stopped")
    elsewhere, _ = make_managed_run(owner)  # another harness's run: never counted
    TaskSandbox.objects.create(run=elsewhere, name="t", image="belvedir-task:z")

    assert warm.predicted_images(run) == ["belvedir-task:a", "belvedir-task:a", "belvedir-task:b"]
    assert warm.predicted_images(elsewhere) == []


def test_the_next_runs_heartbeat_warms_the_images_its_harness_last_used(built, sandbox_settings):
    run, _, _, image, row = built
    Run.objects.filter(pk=run.pk).update(status=Status.SUCCEEDED)
    task_sandboxes_stop_for_run(run_id=run.pk)
    again = Run.objects.create(
        project=run.project, harness=run.harness, harness_snapshot=run.harness_snapshot,
        status=Status.RUNNING, engine=run.engine, started_at=run.started_at,
    )  # fmt: skip
    check = warm.HeartbeatWarm()

    assert check(again.pk, None) == [] and check(again.pk, None) == []  # one thread, no notes
    check.thread.join(120)

    (made,) = TaskSandbox.objects.filter(run=again)
    assert made.status == "warm" and made.image == image and made.container_id
    assert warm_container_running(made)
    sandbox_settings.BELVEDIR_TASK_SANDBOX_WARM = False
    assert warm.warm_run(again.pk) == []  # turned off: none more
    Run.objects.filter(pk=again.pk).update(status=Status.SUCCEEDED)
    task_sandboxes_stop_for_run(run_id=again.pk)
    assert task_containers(again.pk) == []


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


def come_up(row: TaskSandbox) -> None:
    """Its container started, as warm.make's thread starts it (in a thread of the test's)."""
    backend = get_backend()
    spec = container_spec(run=row.run, sandbox_id=row.pk, image=row.image)
    handle = backend.launch(dataclasses.replace(spec, workdir=backend.image_workdir(row.image)))
    backend.detach(handle)
    TaskSandbox.objects.filter(pk=row.pk).update(container_id=handle.id)
    connection.close()


def test_a_create_waits_for_its_runs_warm_task_sandbox_still_starting_instead_of_another(
    cached,
):
    run, client, context, image = cached
    row = starting(run, image)
    coming = threading.Timer(1.0, come_up, [row])
    coming.start()

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
