"""Warm task sandboxes (issue 28, item 3): a managed Harbor run's task containers started
while Harbor still imports in the run's sandbox, from the images its harness's last run used
and this engine holds, so a create of the same image takes a running container instead of
starting one (under gVisor 1-2.5 s, bench/harbor_managed.py).

A warm task sandbox is a row of its run (`TaskSandbox`, status `warm`) and a container made
exactly as that run's create would make it (`containers.container_spec`: its labels name the
run and the row). Only a create of the same run, for the same image (`belvedir-task:<key>`,
keyed by the organization too), and not forced to build, takes it (`claim`, under the lock on
the run the create's slot is counted under): never another run's, never another
organization's. Not taken, it goes when its run ends, as every task sandbox of the run
(`services.task_sandboxes_stop_for_run`, the reaper), its row deleted: it never ran anything.
Its time is not charged (its row's `started_at` is set when a create takes it).

The run's worker makes them (`HeartbeatWarm`: its checks run once the run's sandbox has started,
in a thread of its own), at most HARBOR_CONCURRENCY; `BELVEDIR_TASK_SANDBOX_WARM=0` turns them off.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from belvedir.sandbox_config import get_backend
from harbor.containers import container_spec, on_this_engine, remove
from harbor.models import TaskSandbox
from harbor.selectors import run_is_managed
from harnesses import managed
from runs.contract import run_harness_env
from runs.models import Run, Status
from sandboxes.base import SandboxError

log = logging.getLogger(__name__)
WARM_NAME = "(warm)"
WAIT_SECONDS = 20.0  # how long a create waits for the warm task sandbox it took to come up
POLL_SECONDS = 0.05


def predicted_images(run: Run) -> list[str]:
    """The images the run's harness's last run with task sandboxes used, each as often as it
    did, at most HARBOR_CONCURRENCY in all (the run's own rows not counted)."""
    if run.harness_id is None:
        return []
    previous = (
        TaskSandbox.objects.filter(
            run__harness_id=run.harness_id, run__created_at__lt=run.created_at
        )
        .exclude(image="")
        .exclude(run_id=run.pk)
        .order_by("-created_at")
        .values_list("run_id", flat=True)
        .first()
    )
    if previous is None:
        return []
    used = Counter(
        TaskSandbox.objects.filter(run_id=previous)
        .exclude(image="")
        .exclude(status=TaskSandbox.Status.WARM)
        .order_by("created_at")  # the first used first
        .values_list("image", flat=True)
    )
    cap = managed.concurrency(run_harness_env(run))
    images = [image for image, count in used.most_common() for _ in range(count)]
    return images[:cap]


def make(*, run: Run, images: list[str]) -> list[TaskSandbox]:
    """A warm task sandbox of each image (that this engine holds) for `run`, started at once;
    the rows made. None once the run is no longer running."""
    backend = get_backend()
    held = {tag for _, tags, _ in backend.built_images() for tag in tags}
    wanted = [image for image in images if image in held]
    made: list[TaskSandbox] = []
    threads = [
        threading.Thread(target=_start_one, args=(run, image, made), daemon=True)
        for image in wanted
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return made


def _start_one(run: Run, image: str, made: list[TaskSandbox]) -> None:
    backend = get_backend()
    row = None
    try:
        if not Run.objects.filter(pk=run.pk, status=Status.RUNNING).exists():
            return
        row = TaskSandbox.objects.create(
            run=run, name=WARM_NAME, image=image, cached=True, status=TaskSandbox.Status.WARM
        )
        spec = container_spec(run=run, sandbox_id=row.pk, image=image)
        spec = dataclasses.replace(spec, workdir=backend.image_workdir(image))
        handle = backend.launch(spec)
        backend.detach(handle)
        kept = TaskSandbox.objects.filter(
            pk=row.pk, status=TaskSandbox.Status.WARM, run__status=Status.RUNNING
        ).update(container_id=handle.id)
        if not kept:  # the run ended meanwhile: it must not outlive it
            remove(handle)
            TaskSandbox.objects.filter(pk=row.pk, status=TaskSandbox.Status.WARM).delete()
            return
        made.append(row)
    except SandboxError as exc:
        log.warning("run %s: no warm task sandbox of %s: %s", run.pk, image, exc)
        if row is not None:  # a create waiting for it starts its own at once
            TaskSandbox.objects.filter(pk=row.pk, status=TaskSandbox.Status.WARM).delete()
    finally:
        connection.close()  # this thread's own


def untaken() -> Q:
    """The warm task sandboxes no create has taken (the rest count against the run's
    HARBOR_CONCURRENCY, as running ones)."""
    return Q(status=TaskSandbox.Status.WARM, name=WARM_NAME)


def claim(*, run: Run, image: str, name: str) -> TaskSandbox | None:
    """A warm task sandbox of `run` (this run's, never another's) of `image`, taken for the
    task `name`: RUNNING when its container is up, else still WARM under the task's name
    while its container starts (`when_up`); None when it has none. Called under the lock on
    the run."""
    mine = TaskSandbox.objects.filter(untaken(), run=run, image=image).order_by("created_at")
    warm = mine.exclude(container_id="").first() or mine.first()  # the ones up first
    if warm is None:
        return None
    up = {"status": TaskSandbox.Status.RUNNING, "started_at": timezone.now()}
    TaskSandbox.objects.filter(untaken(), pk=warm.pk).update(
        name=name, **(up if warm.container_id else {})
    )
    warm.refresh_from_db()
    return warm


def when_up(sandbox: TaskSandbox, *, wait: float | None = None) -> TaskSandbox | None:
    """The taken warm task sandbox, RUNNING once its container is up (under gVisor its start
    takes 1-4 s, begun as the run started: waiting for it is never longer than starting
    another); None when it did not come up within `wait` seconds or went (its start failed,
    its run ended), given back untaken if it is still there."""
    deadline = time.monotonic() + (WAIT_SECONDS if wait is None else wait)
    while time.monotonic() < deadline:
        row = TaskSandbox.objects.filter(pk=sandbox.pk, status=TaskSandbox.Status.WARM).first()
        if row is None:
            return None
        if row.container_id:
            TaskSandbox.objects.filter(pk=row.pk, status=TaskSandbox.Status.WARM).update(
                status=TaskSandbox.Status.RUNNING, started_at=timezone.now()
            )
            row.refresh_from_db()
            return row
        time.sleep(POLL_SECONDS)
    TaskSandbox.objects.filter(pk=sandbox.pk, status=TaskSandbox.Status.WARM).update(name=WARM_NAME)
    return None


def warm_run(run_id: str) -> list[TaskSandbox]:
    """What the run's worker does once: warm task sandboxes for a running managed Harbor run
    on this engine, from its harness's last run's images."""
    run = Run.objects.filter(pk=run_id, status=Status.RUNNING).select_related("project").first()
    if run is None or not settings.BELVEDIR_TASK_SANDBOX_WARM or not run_is_managed(run):
        return []
    if not on_this_engine(run):
        return []
    images = predicted_images(run)
    return make(run=run, images=images) if images else []


class HeartbeatWarm:
    """The run's worker's heartbeat check (runs/hooks.py heartbeat_checks) that, on its first
    beat, makes the run's warm task sandboxes in a thread of its own; it notes nothing."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None

    def __call__(self, run_id: str, backend) -> list[str]:
        if self.thread is None:
            self.thread = threading.Thread(
                target=self._warm, args=(run_id,), daemon=True, name=f"warm {run_id}"
            )
            self.thread.start()
        return []

    @staticmethod
    def _warm(run_id: str) -> None:
        try:
            warm_run(run_id)
        except Exception:  # a run never fails for want of a warm sandbox
            log.warning("run %s: no warm task sandboxes", run_id, exc_info=True)
        finally:
            connection.close()  # this thread's own
