"""Warm task sandboxes (harbor/warm.py): a managed Harbor run's task containers started ahead
from its harness's last run's images. The attack first: a warm task sandbox is never handed
to another run, of the same organization or another, nor to a forced build; then its own
run's create takes it, and it never outlives its run."""

import pytest

from harbor import warm
from harbor.models import TaskSandbox
from harbor.services import task_sandboxes_stop_for_run
from runs.models import Run, Status
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
