"""No stuck runs: fail runs whose worker died, requeue lost queued runs, remove orphan sandboxes,
free the GPU devices of runs whose worker died.

Every worker host runs it (the housekeeping cluster's schedule, and each runs or GPU cluster
every BELVEDIR_REAP_SECONDS): the runs of any host whose heartbeats stopped are failed by
whichever host sees it first, so a vanished host's runs end too, but a host only ever removes
the sandboxes and volumes of its own engine (the one `get_backend()` talks to): its own
platform's, and those of another platform instance gone from the host (no heartbeat there for
BELVEDIR_INSTANCE_STALE s; each pass is this instance's heartbeat, sandboxes/instances.py).
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models.functions import Now

from belvedir.sandbox_config import engine_name, get_backend
from harnesses import install_cache
from runs import gpu, hooks
from runs.contract import clip_log_tail
from runs.models import Run, Status
from runs.queue import runs_with_queued_tasks
from runs.services import run_enqueue, run_finish
from sandboxes.base import SandboxError, SandboxHandle

log = logging.getLogger(__name__)
LOST_NOTE = (
    "belvedir: the worker running this run stopped responding (no heartbeat for {seconds} s"
    "{where}); the run was failed and its sandbox removed."
)


def lost_note(run: Run, stale: int) -> str:
    host = run.engine.split(" ")[0] if run.engine else ""
    return LOST_NOTE.format(where=f" on {host}" if host else "", seconds=stale)


def reap() -> dict:
    """One pass; safe to run at any time and twice at once (every change is conditional)."""
    backend = get_backend()
    stale = settings.BELVEDIR_HEARTBEAT_STALE
    failed, requeued, removed = [], [], 0

    # On the database's clock, as the heartbeats are written: a host whose clock runs ahead
    # must not see the other hosts' fresh heartbeats as stale.
    cutoff = Now() - timedelta(seconds=stale)
    for run in Run.objects.filter(status=Status.RUNNING, heartbeat_at__lt=cutoff):
        note = lost_note(run, stale)
        if run_finish(
            run_id=run.pk,
            status=Status.FAILED,
            notes=[*run.notes, note],
            log_tail=clip_log_tail(f"{run.log_tail}\n{note}\n"),
            log_size=run.log_size + len(note) + 2,  # the log API's offsets see the note too
            heartbeat_before=cutoff,
            platform_failed=True,
        ):
            failed.append(run.pk)

    queued_stale = Now() - timedelta(seconds=settings.BELVEDIR_QUEUED_STALE)
    # Queued runs whose task was lost: waiting long, and no task of theirs in the broker (a run
    # merely waiting behind busy workers still has one). The claim is atomic anyway.
    waiting = dict(
        Run.objects.filter(status=Status.QUEUED, enqueued_at__lt=queued_stale).values_list(
            "pk", "gpu_type"
        )
    )
    queues = {gpu.queue_name(kind) for kind in waiting.values() if kind}
    for run_id in sorted(set(waiting) - runs_with_queued_tasks(waiting, queues)):
        run_enqueue(run_id=run_id)
        requeued.append(run_id)

    try:
        sandboxes = backend.list_by_label()
    except SandboxError as exc:
        log.warning("reaper could not list sandboxes: %s", exc)
        sandboxes = []
    live = set(
        Run.objects.filter(pk__in=[s.run_id for s in sandboxes], status=Status.RUNNING).values_list(
            "pk", flat=True
        )
    )
    for sandbox in sandboxes:
        if sandbox.run_id in live:
            continue
        handle = SandboxHandle(id=sandbox.id, run_id=sandbox.run_id)
        try:
            backend.kill(handle)
            backend.remove(handle)
            removed += 1
        except SandboxError as exc:
            log.warning("reaper could not remove sandbox %s: %s", sandbox.id, exc)
    for reaper_pass in hooks.reaper_passes:  # harbor's: task sandboxes whose run ended
        reaper_pass()
    freed = gpu.devices_release_stale()
    # This instance's heartbeat on this host, and the sandboxes of instances gone from it.
    try:
        gone_removed = backend.sweep_gone_instances()
    except SandboxError as exc:
        log.warning("reaper could not sweep the sandboxes of gone platforms: %s", exc)
        gone_removed = []
    try:
        warm_removed = backend.sweep_warm()  # this engine's warm pool ([] without one)
    except SandboxError as exc:
        log.warning("reaper could not sweep the warm sandboxes: %s", exc)
        warm_removed = []
    try:  # the install snapshots no row names (cleared), or over the budget
        install_cache.sweep(
            backend=backend,
            host=engine_name(),
            running=set(Run.objects.filter(status=Status.RUNNING).values_list("pk", flat=True)),
        )
    except SandboxError as exc:
        log.warning("reaper could not sweep the install cache: %s", exc)
    try:
        released = backend.sweep_volumes()
    except SandboxError as exc:
        log.warning("reaper could not release orphan disk volumes: %s", exc)
        released = []
    if failed or requeued or removed or released or freed or warm_removed or gone_removed:
        log.info(
            "reaper: failed %s, requeued %s, removed %d sandboxes, released volumes %s, "
            "freed GPU devices %s, removed %d stale warm sandboxes and %d of gone platforms",
            failed,
            requeued,
            removed,
            released,
            freed,
            len(warm_removed),
            len(gone_removed),
        )
    return {
        "failed": failed,
        "requeued": requeued,
        "removed": removed,
        "released": released,
        "warm_removed": warm_removed,
        "gone_removed": gone_removed,
    }
