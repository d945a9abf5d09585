"""The reaper removes task images no task sandbox used for BELVEDIR_TASK_IMAGE_TTL, so the
engine's disk does not fill with the images of past runs (issue 21); an image still used
within the period, or by a container, stays, and no other image is touched."""

from __future__ import annotations

import io
import secrets
import time
from datetime import timedelta

import docker
import pytest
from django.utils import timezone

from belvedir.sandbox_config import instance_id
from harbor.models import TaskSandbox
from harbor.reaper import task_images_reap
from sandboxes.base import LABEL_INSTANCE
from sandboxes.tasks import LABEL_TASK_IMAGE
from tests.helpers.task_sandboxes import BASE_IMAGE, make_managed_run, remove_task_images

pytestmark = [pytest.mark.docker, pytest.mark.django_db]


@pytest.fixture
def engine():
    client = docker.from_env()
    yield client
    client.close()


def image(engine, made: set[str], *, task: bool = True, instance: str = "") -> str:
    tag = f"belvedir-task:reap-{secrets.token_hex(6)}"
    label = f"LABEL {LABEL_TASK_IMAGE}=1 {LABEL_INSTANCE}={instance or instance_id()}\n"
    dockerfile = (
        f"FROM {BASE_IMAGE}\n{label if task or instance else ''}LABEL m={secrets.token_hex(8)}\n"
    )
    engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    made.add(tag)
    return tag


def exists(engine, tag: str) -> bool:
    try:
        engine.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_task_images_unused_for_the_period_are_removed_and_the_others_stay(engine, owner, settings):
    # A platform of its own on the engine: its reap sees only this test's task images, not
    # those another test (or a run's background work) is building or using meanwhile.
    settings.BELVEDIR_INSTANCE = f"reap-test-{secrets.token_hex(4)}"
    made: set[str] = set()
    containers = []
    try:
        unused, used_lately, used_long_ago, held = (image(engine, made) for _ in range(4))
        not_a_task_image = image(engine, made, task=False)
        another_platforms = image(engine, made, task=False, instance="another-platform")
        containers.append(engine.containers.create(held, ["true"]))  # stopped, still holds it
        run, _ = make_managed_run(owner)
        settings.BELVEDIR_TASK_IMAGE_TTL = 1
        time.sleep(1.5)  # every image above was made more than the period ago
        TaskSandbox.objects.create(run=run, name="a", image=used_lately)
        TaskSandbox.objects.create(
            run=run, name="b", image=used_long_ago, created_at=timezone.now() - timedelta(days=2)
        )

        removed = task_images_reap()

        assert removed == 2  # the two above, and no other
        assert not exists(engine, unused) and not exists(engine, used_long_ago)
        assert exists(engine, used_lately) and exists(engine, held)
        assert exists(engine, not_a_task_image) and exists(engine, another_platforms)
        assert task_images_reap() == 0  # what stays is not tried as removed again
    finally:
        for container in containers:
            container.remove(force=True)
        remove_task_images(made)


def test_the_reapers_pass_removes_unused_task_images(engine, owner, settings):
    from runs.reaper import reap

    made: set[str] = set()
    try:
        unused = image(engine, made)
        settings.BELVEDIR_TASK_IMAGE_TTL = 1
        time.sleep(1.5)

        reap()

        assert not exists(engine, unused)
    finally:
        remove_task_images(made)
