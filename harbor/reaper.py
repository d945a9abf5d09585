"""Harbor's reaper pass (runs' reaper calls it each pass: harbor/hooks.py): the task sandboxes
of runs that ended are stopped and settled, stopped ones nobody charged are charged, this
engine's task containers whose row is no longer alive are removed, and old task images go."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from belvedir.sandbox_config import get_backend
from harbor.containers import remove
from harbor.models import TaskSandbox
from harbor.services import task_sandbox_settle, task_sandboxes_stop_for_run
from runs.models import Status
from sandboxes.base import LABEL_TASK_SANDBOX, SandboxError, SandboxHandle

log = logging.getLogger(__name__)
SETTLE_GRACE = 60  # seconds a stopped task sandbox may wait for its charge before the reaper


def task_sandboxes_unsettled() -> models.QuerySet[TaskSandbox]:
    """Task sandboxes stopped but never settled (the process that stopped one died before
    charging it), past the grace their own stop has to charge them. Served by the partial
    index `task_sandbox_uncharged` (charged=False): each reaper pass reads the few uncharged
    rows, not every task sandbox ever made."""
    return TaskSandbox.objects.filter(
        charged=False, stopped_at__lt=timezone.now() - timedelta(seconds=SETTLE_GRACE)
    ).exclude(status__in=TaskSandbox.ALIVE)


def task_sandboxes_reap() -> int:
    """The reaper's pass: stop the task sandboxes whose run is no longer running (their rows
    whichever host sees them first, their containers on this engine only), and remove this
    engine's task containers whose row is no longer alive (stopped from another host while
    the run went on); charge the stopped ones nobody charged. How many runs' task sandboxes
    were stopped."""
    stale = TaskSandbox.objects.filter(status__in=TaskSandbox.ALIVE).exclude(
        run__status=Status.RUNNING
    )
    run_ids = set(stale.values_list("run_id", flat=True))
    for run_id in run_ids:
        task_sandboxes_stop_for_run(run_id=run_id)
    for sandbox_id in task_sandboxes_unsettled().values_list("pk", flat=True):
        task_sandbox_settle(sandbox_id=sandbox_id)
    try:
        _remove_stopped_containers()
    except Exception as exc:  # the next pass tries again
        log.warning("could not list this engine's task sandboxes: %s", exc)
    try:
        task_images_reap()
    except SandboxError as exc:  # the next pass tries again
        log.warning("could not remove this engine's unused task images: %s", exc)
    return len(run_ids)


def task_images_reap() -> int:
    """This platform's task images on this engine made, and last used by a task sandbox,
    more than BELVEDIR_TASK_IMAGE_TTL ago: removed unless a container still uses one, so the
    engine's disk does not fill with the images of past runs. How many were removed."""
    backend = get_backend()
    cutoff = timezone.now() - timedelta(seconds=settings.BELVEDIR_TASK_IMAGE_TTL)
    old = [
        (image_id, tags)
        for image_id, tags, made in backend.built_images()
        if made < cutoff.timestamp()
    ]
    tags = {tag for _, image_tags in old for tag in image_tags}
    used = set(
        TaskSandbox.objects.filter(image__in=tags, created_at__gte=cutoff).values_list(
            "image", flat=True
        )
    )
    removed = 0
    for image_id, image_tags in old:
        if not used.isdisjoint(image_tags):
            continue
        try:
            gone = backend.remove_image(image_id, image_tags)
        except SandboxError as exc:  # the next pass tries again; the others go on
            log.warning("could not remove the task image %s: %s", image_id[:19], exc)
            continue
        if gone:
            log.info("removed the unused task image %s (%s)", image_id[:19], ", ".join(image_tags))
            removed += 1
    return removed


def _remove_stopped_containers() -> None:
    found = get_backend().list_with_label(LABEL_TASK_SANDBOX)
    ids = {sandbox_id for _, sandbox_id in found}
    alive = set(
        TaskSandbox.objects.filter(pk__in=ids, status__in=TaskSandbox.ALIVE).values_list(
            "pk", flat=True
        )
    )
    for info, sandbox_id in found:
        if sandbox_id not in alive:
            remove(SandboxHandle(id=info.id, run_id=info.run_id))
