"""Task sandboxes of managed Harbor runs (docs/task-sandboxes.md): create (build the task's
image, start its container) under the run's HARBOR_CONCURRENCY, stop and settle, stop every
one of a run when it ends. The API (runs/task_sandbox_api.py) calls these; so do the run's
finish and cancel paths (runs.services), the worker that ran the run, and the reaper.

A run's task sandboxes live on the run's own engine (`Run.engine`, recorded by the worker host
that claimed it), on its sandbox network beside the run's sandbox. Only a platform process on
that engine starts, execs in or removes them (`require_this_engine`); anywhere else a request
is refused (409, naming both hosts), and stopping one there only ends its row: the run's own
host removes the container (its worker when the run ends, its reaper otherwise).
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
from django.db import connection, models, transaction
from django.utils import timezone

from belvedir.errors import (
    Conflict,
    Forbidden,
    Invalid,
    LimitReached,
    PaymentRequired,
    Unavailable,
)
from billing import selectors as billing_selectors
from billing import services as billing
from billing.money import usd
from harnesses import env_secrets, managed
from runs.models import Run, Status, TaskSandbox
from runs.sandbox_config import engine_name, get_backend, spec_from_settings
from sandboxes import taskpolicy
from sandboxes import tasks as docker_tasks
from sandboxes.base import (
    LABEL_RUN_ID,
    LABEL_TASK_SANDBOX,
    SandboxError,
    SandboxHandle,
)

log = logging.getLogger(__name__)
NAME_MAX = 200
RETRY_AFTER = 2
SETTLE_GRACE = 60  # seconds a stopped task sandbox may wait for its charge before the reaper
OUT_OF_CREDITS = (
    "belvedir: the organization ran out of credits for task sandboxes (balance {balance}, pay "
    "as you go off or at its monthly limit), so the run was ended; add credits or turn on pay "
    "as you go under Organization Settings → Billing."
)


def run_env(run: Run) -> dict[str, str]:
    snapshot_env = (run.harness_snapshot or {}).get("env") or {}
    return env_secrets.env_plain(snapshot_env, run.harness_env_secrets_encrypted)


def run_is_managed(run: Run) -> bool:
    snap = run.harness_snapshot or {}
    return managed.is_managed(
        repo_url=snap.get("repo_url", ""), preset=snap.get("preset", ""), env=run_env(run)
    )


def _require_managed_running(run: Run) -> None:
    if not run_is_managed(run):
        raise Forbidden(
            "Task sandboxes are for managed Harbor runs only (the platform's Harbor driver, "
            "MODAL_TOKEN_ID / MODAL_TOKEN_SECRET blank).",
            code="not_managed",
        )
    if run.status != Status.RUNNING:
        raise Forbidden(f"The run is {run.status}, not running.", code="not_managed")


def on_this_engine(run: Run) -> bool:
    """Whether this process talks to the run's engine: its worker host and DOCKER_HOST."""
    return bool(run.engine) and run.engine == engine_name()


def require_this_engine(run: Run) -> None:
    """Refuse (409 `wrong_host`) unless this process is on the run's engine: a task sandbox
    started here would sit on another host than its run, outside the run's sandbox network."""
    if on_this_engine(run):
        return
    host, _, engine = run.engine.partition(" ")
    here_host, _, here_engine = engine_name().partition(" ")
    where = f"worker host {host} (engine {engine})" if run.engine else "no worker host yet"
    raise Conflict(
        f"This run's sandbox is on {where}, but this platform process is on {here_host} "
        f"(engine {here_engine}). A run's task sandboxes run on its own engine and are served "
        f"only by a platform process on {host or 'that host'}: its sandbox gateway forwards the "
        "task-sandbox paths there (BELVEDIR_SANDBOX_GATEWAY_TASK_UPSTREAM, docs/scaling.md).",
        code="wrong_host",
    )


def running_micros(organization_id: str) -> int:
    """What the organization's running task sandboxes have used so far and not yet been
    charged (each is charged when it stops), per started minute."""
    price = billing_selectors.task_sandbox_price_per_minute()
    if not price:
        return 0
    now = timezone.now()
    started = TaskSandbox.objects.filter(
        run__project__organization_id=organization_id,
        status=TaskSandbox.Status.RUNNING,
        started_at__isnull=False,
    ).values_list("started_at", flat=True)
    return sum(max(1, math.ceil((now - at).total_seconds() / 60)) * price for at in started)


def _has_credits(org) -> tuple[bool, int]:
    """Whether the organization may start one more task sandbox, counting the time its
    running ones have used (not yet charged); and its balance net of that time."""
    balance = billing_selectors.balance(organization=org)
    if not billing.may_start_credit_run(organization=org):
        return False, balance
    running = running_micros(org.pk)
    if not running or balance - running > 0:
        return True, balance - running
    account = billing_selectors.account_for(organization=org)
    spent = billing_selectors.month_run_spend(organization=org) + running
    return account.pay_as_you_go and spent < account.monthly_limit_micros, balance - running


def _require_credits(run: Run) -> None:
    """Out of credits without pay as you go (counting the time of the task sandboxes still
    running): refuse, and end the run with a note."""
    org = run.project.organization
    enough, left = _has_credits(org)
    if enough:
        return
    balance = usd(left)
    from runs.services import run_finish  # run_finish stops task sandboxes: imported late

    note = OUT_OF_CREDITS.format(balance=balance)
    run_finish(
        run_id=run.pk,
        status=Status.FAILED,
        notes=[*run.notes, note],
        log_tail=f"{run.log_tail}\n{note}\n",
        log_size=run.log_size + len(note) + 2,
    )
    raise PaymentRequired(
        f"Your organization's balance is {balance} and pay as you go is off (or at its monthly "
        "limit): no new task sandboxes; the run was ended.",
        code="balance",
    )


def _reserve(*, run: Run, name: str) -> TaskSandbox:
    """A STARTING row, counted under a lock on the run so concurrent creates never pass
    HARBOR_CONCURRENCY."""
    cap = managed.concurrency(run_env(run))
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
        alive = TaskSandbox.objects.filter(run=locked, status__in=TaskSandbox.ALIVE).count()
        if alive >= cap:
            raise LimitReached(
                f"The run already has {alive} task sandboxes running (HARBOR_CONCURRENCY is "
                f"{cap}); stop one first or retry shortly.",
                code="concurrency",
                retry_after=RETRY_AFTER,
            )
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
    _require_credits(run)
    try:
        digest = docker_tasks.context_digest(
            context, max_bytes=settings.BELVEDIR_TASK_SANDBOX_CONTEXT_UNPACKED_MAX_BYTES
        )
    except SandboxError as exc:
        raise Invalid(f"context: {exc}.", field="context") from None
    sandbox = _reserve(run=run, name=name)
    try:
        return _start(
            run=run, sandbox=sandbox, context=context, digest=digest, force_build=force_build
        )
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
    *, run: Run, sandbox: TaskSandbox, context: Path, digest: str, force_build: bool
) -> TaskSandbox:
    backend = get_backend()
    organization = run.project.organization_id
    tag = backend.image_tag(context=context, digest=digest, organization=organization)
    spec = spec_from_settings(
        run_id=run.pk,
        image=tag,
        command=["sleep", "infinity"],
        disk_bytes=None,  # Harbor task images write anywhere: a writable root, no quota volume
        user="",  # the image's user: Harbor task images expect root
        cap_add=docker_tasks.TASK_CAPABILITIES,
        labels={LABEL_TASK_SANDBOX: sandbox.pk},
    )
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
        _remove(handle)
        raise Forbidden("The run ended while its task sandbox started.", code="not_managed")
    sandbox.refresh_from_db()
    return sandbox


def build_policy(organization: str) -> taskpolicy.Policy:
    """What an organization's task-image build may name, pull and write: the operator's
    base images, and what a task sandbox may write (runs.task_sandbox_disk.limit_bytes,
    which imports this module)."""
    return taskpolicy.Policy(
        bases=tuple(settings.BELVEDIR_TASK_BASE_IMAGES),
        pull=settings.BELVEDIR_TASK_BASE_PULL,
        organization=organization,
        disk=settings.BELVEDIR_TASK_SANDBOX_DISK or settings.BELVEDIR_SANDBOX_DISK,
    )


def _remove(handle: SandboxHandle) -> None:
    backend = get_backend()
    try:
        backend.kill(handle)
        backend.remove(handle)
    except SandboxError as exc:
        log.warning("could not remove task sandbox container %s: %s", handle.id, exc)


def task_sandbox_stop(*, sandbox: TaskSandbox, error: str = "") -> TaskSandbox:
    """Kill and remove its container, mark it stopped (`error`: failed, saying why), settle
    its time (each once). On another engine than its run's, only the row: the run's host
    removes the container (its worker at the run's end, its reaper's next pass)."""
    if sandbox.container_id and on_this_engine(sandbox.run):
        _remove(SandboxHandle(id=sandbox.container_id, run_id=sandbox.run_id))
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
            _remove(SandboxHandle(id=info.id, run_id=run_id))
            removed += 1
    except Exception as exc:  # the reaper removes what is left: a run's end must not fail
        log.warning("could not list the task sandboxes of %s: %s", run_id, exc)
    return removed


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
    more than BELVEDIR_TASK_IMAGE_TTL ago: removed unless a container still uses one, so the engine's disk does not fill with the images of past runs. How
    many were removed."""
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
            _remove(SandboxHandle(id=info.id, run_id=info.run_id))


PAGE_ROWS = 50


def page_view(run: Run) -> dict:
    """What the run page shows of a managed Harbor run's task sandboxes: the newest rows, how
    many at once, the price per minute (micro-dollars) and the total charged so far."""
    if not run_is_managed(run):
        return {"task_sandboxes": None}
    rows = list(TaskSandbox.objects.filter(run=run)[:PAGE_ROWS])
    totals = TaskSandbox.objects.filter(run=run).aggregate(
        count=models.Count("pk"), charged=models.Sum("charged_micros")
    )
    return {
        "task_sandboxes": rows,
        "task_sandboxes_count": totals["count"],
        "task_sandboxes_alive": sum(1 for row in rows if row.is_alive),
        "task_sandboxes_charged": totals["charged"] or 0,
        "task_sandbox_concurrency": managed.concurrency(run_env(run)),
        "task_sandbox_price": billing_selectors.task_sandbox_price_per_minute(),
    }
