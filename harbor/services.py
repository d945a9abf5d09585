"""Task sandboxes of managed Harbor runs (docs/task-sandboxes.md): create (build the task's
image, start its container) under the run's HARBOR_CONCURRENCY, stop and settle, stop every
one of a run when it ends. The API (harbor/api.py) calls these; so do the run's end
(harbor/hooks.py: runs calls it when a run ends) and harbor's reaper pass (harbor/reaper.py).

A run's task sandboxes live on the run's own engine (`Run.engine`, recorded by the worker host
that claimed it), on its sandbox network beside the run's sandbox. Only a platform process on
that engine starts, execs in or removes them (`containers.require_this_engine`); anywhere else
a request is refused (409, naming both hosts), and stopping one there only ends its row: the
run's own host removes the container (its worker when the run ends, its reaper otherwise).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from belvedir.errors import Forbidden, Invalid, LimitReached, Unavailable
from belvedir.sandbox_config import engine_name, get_backend
from billing import selectors as billing_selectors
from billing import services as billing
from harbor import credits, warm
from harbor.containers import (
    build_policy,
    container_spec,
    on_this_engine,
    remove,
    require_this_engine,
)
from harbor.models import TaskSandbox
from harbor.selectors import run_is_managed
from harnesses import managed
from runs.contract import run_harness_env
from runs.models import Run, Status
from sandboxes import tasks as docker_tasks
from sandboxes.base import LABEL_RUN_ID, LABEL_TASK_SANDBOX, SandboxError, SandboxHandle

log = logging.getLogger(__name__)
NAME_MAX = 200
RETRY_AFTER = 2


def _require_managed_running(run: Run) -> None:
    if not run_is_managed(run):
        raise Forbidden(
            "Task sandboxes are for managed Harbor runs only (the platform's Harbor driver, "
            "MODAL_TOKEN_ID / MODAL_TOKEN_SECRET blank).",
            code="not_managed",
        )
    if run.status != Status.RUNNING:
        raise Forbidden(f"The run is {run.status}, not running.", code="not_managed")


def _reserve(*, run: Run, name: str, warm_image: str = "") -> TaskSandbox:
    """A STARTING row, counted under a lock on the run so concurrent creates never pass
    HARBOR_CONCURRENCY; or, with `warm_image`, the run's own warm task sandbox of that image
    taken: RUNNING, or WARM under the task's name while its container still starts
    (harbor/warm.py). A warm one counts once it is taken."""
    cap = managed.concurrency(run_harness_env(run))
    lost = timezone.now() - timedelta(seconds=settings.BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT + 120)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != Status.RUNNING:
            raise Forbidden(f"The run is {locked.status}, not running.", code="not_managed")
        # A create whose process died while the image built never finishes: free its slot.
        TaskSandbox.objects.filter(
            run=locked, status=TaskSandbox.Status.STARTING, created_at__lt=lost
        ).update(
            status=TaskSandbox.Status.FAILED,
            error="lost while starting (the platform process stopped during the build)",
            stopped_at=timezone.now(),
        )
        alive = (
            TaskSandbox.objects.filter(run=locked, status__in=TaskSandbox.ALIVE)
            .exclude(warm.untaken())
            .count()
        )
        if alive >= cap:
            raise LimitReached(
                f"The run already has {alive} task sandboxes running (HARBOR_CONCURRENCY is "
                f"{cap}); stop one first or retry shortly.",
                code="concurrency",
                retry_after=RETRY_AFTER,
            )
        if warm_image and (taken := warm.claim(run=locked, image=warm_image, name=name)):
            return taken
        return TaskSandbox.objects.create(run=locked, name=name)


def task_sandbox_create(
    *, run: Run, name: str, context: Path, force_build: bool = False
) -> TaskSandbox:
    """Build the task's image (cached by content; `force_build`: again, without the cache)
    and start its container for `run`."""
    name = (name or "").strip()
    if not name or len(name) > NAME_MAX:
        raise Invalid(f"name is required, at most {NAME_MAX} characters.", field="name")
    _require_managed_running(run)
    require_this_engine(run)
    credits.require_credits(run)
    try:
        digest = docker_tasks.context_digest(
            context, max_bytes=settings.BELVEDIR_TASK_SANDBOX_CONTEXT_UNPACKED_MAX_BYTES
        )
    except SandboxError as exc:
        raise Invalid(f"context: {exc}.", field="context") from None
    backend = get_backend()
    tag = backend.image_tag(
        context=context, digest=digest, organization=run.project.organization_id
    )
    sandbox = _reserve(run=run, name=name, warm_image="" if force_build else tag)
    if sandbox.status == TaskSandbox.Status.WARM:  # taken while its container starts
        sandbox = warm.when_up(sandbox) or _reserve(run=run, name=name)
    if sandbox.status == TaskSandbox.Status.RUNNING:  # a warm one, taken
        handle = SandboxHandle(id=sandbox.container_id, run_id=run.pk)
        if sandbox.container_id in backend.written_bytes([handle]):  # still up
            return sandbox
        task_sandbox_stop(sandbox=sandbox, error="its warm container was gone")
        sandbox = _reserve(run=run, name=name)
    try:
        return _start(run=run, sandbox=sandbox, context=context, tag=tag, force_build=force_build)
    except BaseException as exc:
        TaskSandbox.objects.filter(pk=sandbox.pk, status=TaskSandbox.Status.STARTING).update(
            status=TaskSandbox.Status.FAILED, error=str(exc)[:4000], stopped_at=timezone.now()
        )
        if isinstance(exc, docker_tasks.BuildFailed):
            raise Invalid(str(exc), field="context", code="build_failed") from None
        if isinstance(exc, SandboxError):
            raise Unavailable(f"The task sandbox could not start: {exc}", retry_after=10) from None
        raise


@contextlib.contextmanager
def _building(tag: str) -> Iterator[None]:
    """One build of a task image at a time on this engine (a PostgreSQL advisory lock, let go
    with its connection if the process dies): concurrent creates of one environment wait for
    the first build and then find the image cached, instead of each building it."""
    key = f"belvedir-task-build|{engine_name()}|{tag}"
    lock = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [lock])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock])


def _start(
    *, run: Run, sandbox: TaskSandbox, context: Path, tag: str, force_build: bool
) -> TaskSandbox:
    backend = get_backend()
    organization = run.project.organization_id
    spec = container_spec(run=run, sandbox_id=sandbox.pk, image=tag)
    with _building(tag):
        cached = backend.build_image(
            context=context,
            tag=tag,
            like=spec,
            timeout=settings.BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT,
            policy=build_policy(organization),
            force=force_build,
        )
    spec = dataclasses.replace(spec, workdir=backend.image_workdir(tag))
    handle = backend.launch(spec)
    backend.detach(handle)  # nobody reads a task sandbox's main output
    now = timezone.now()
    started = TaskSandbox.objects.filter(
        pk=sandbox.pk, status=TaskSandbox.Status.STARTING, run__status=Status.RUNNING
    ).update(
        status=TaskSandbox.Status.RUNNING,
        container_id=handle.id,
        image=tag,
        cached=cached,
        started_at=now,
    )
    if not started:  # the run ended while the image built: it must not outlive it
        remove(handle)
        raise Forbidden("The run ended while its task sandbox started.", code="not_managed")
    sandbox.refresh_from_db()
    return sandbox


def task_sandbox_stop(*, sandbox: TaskSandbox, error: str = "") -> TaskSandbox:
    """Kill and remove its container, mark it stopped (`error`: failed, saying why), settle
    its time (each once). On another engine than its run's, only the row: the run's host
    removes the container (its worker at the run's end, its reaper's next pass)."""
    if sandbox.container_id and on_this_engine(sandbox.run):
        remove(SandboxHandle(id=sandbox.container_id, run_id=sandbox.run_id))
    if sandbox.status == TaskSandbox.Status.WARM:  # never taken: it ran nothing, costs nothing
        TaskSandbox.objects.filter(pk=sandbox.pk, status=TaskSandbox.Status.WARM).delete()
        return sandbox
    ended = {"status": TaskSandbox.Status.FAILED, "error": error} if error else {}
    TaskSandbox.objects.filter(pk=sandbox.pk, status__in=TaskSandbox.ALIVE).update(
        **{"status": TaskSandbox.Status.STOPPED, "stopped_at": timezone.now(), **ended}
    )
    task_sandbox_settle(sandbox_id=sandbox.pk)
    sandbox.refresh_from_db()
    return sandbox


def minutes_used(sandbox: TaskSandbox) -> int:
    """Started minutes from start to stop (0 for one that never started)."""
    if sandbox.started_at is None or sandbox.stopped_at is None:
        return 0
    seconds = (sandbox.stopped_at - sandbox.started_at).total_seconds()
    return max(1, math.ceil(seconds / 60))


def task_sandbox_settle(*, sandbox_id: str) -> int:
    """Charge a stopped task sandbox's minutes to its organization, once; the amount."""
    with transaction.atomic():
        sandbox = (
            TaskSandbox.objects.select_for_update()
            .select_related("run__project")
            .filter(pk=sandbox_id, charged=False)
            .exclude(status__in=TaskSandbox.ALIVE)
            .first()
        )
        if sandbox is None:
            return 0
        amount = minutes_used(sandbox) * billing_selectors.task_sandbox_price_per_minute()
        billing.usage_charge(
            organization_id=sandbox.run.project.organization_id,
            reference=sandbox.pk,
            amount_micros=amount,
        )
        sandbox.charged, sandbox.charged_micros = True, amount
        sandbox.save(update_fields=["charged", "charged_micros"])
    return amount


def task_sandboxes_stop_for_run(*, run_id: str) -> int:
    """Stop every task sandbox of a run (it ended, was cancelled or reaped): the rows
    anywhere, the containers only on the run's own engine; how many containers were removed.
    A run that never asked for one costs nothing here (a container exists only for a row, and
    a row that starts after this finds its run ended and removes its own container)."""
    if not TaskSandbox.objects.filter(run_id=run_id).exists():
        return 0
    alive = TaskSandbox.objects.filter(run_id=run_id, status__in=TaskSandbox.ALIVE)
    for sandbox in alive.select_related("run"):
        task_sandbox_stop(sandbox=sandbox)
    run = Run.objects.filter(pk=run_id).only("engine").first()
    if run is None or not on_this_engine(run):
        return 0  # its own host's worker or reaper removes the containers
    removed = 0
    try:
        for info, _ in get_backend().list_with_label(LABEL_TASK_SANDBOX, {LABEL_RUN_ID: run_id}):
            remove(SandboxHandle(id=info.id, run_id=run_id))
            removed += 1
    except Exception as exc:  # the reaper removes what is left: a run's end must not fail
        log.warning("could not list the task sandboxes of %s: %s", run_id, exc)
    return removed
