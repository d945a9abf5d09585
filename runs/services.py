"""Run writes: launch (checks and caps), cancel, finish. Tasks and views call these."""

import hashlib
import math
import re
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.expressions import Combinable
from django.db.models.functions import Now
from django.utils import timezone

from belvedir import audit, crypto
from belvedir.db import reconnecting
from belvedir.errors import Invalid, LimitReached
from belvedir.models import ApiKey, Organization, Project
from belvedir.sandbox_config import get_backend
from belvedir.services import api_key_create, api_key_revoke
from belvedir.text import counted
from billing import services as billing
from harnesses import env_secrets, managed
from harnesses.models import DEFAULT_GPU_TYPE, Compute, Harness
from harnesses.services import FIELDS as HARNESS_FIELDS
from models_registry.models import FineTunedModel
from runs import gpu, hooks
from runs.contract import run_model_secrets
from runs.launch_checks import (
    check_fine_tuned,
    check_launch_input,
    launch_ready,
    repo_check,
)
from runs.model_access import default_judge, model_access_check
from runs.models import IN_FLIGHT, STAGES, Grading, Run, Stage, Status
from runs.queue import run_task_enqueue
from sandboxes.base import SandboxError, kill_run_sandboxes


def _launches_counted(*, org: Organization, since: datetime) -> QuerySet[Run]:
    """The launches the 24-hour cap counts: the organization's runs since `since`, less those
    the platform failed (the user got no run of them)."""
    return Run.objects.filter(
        project__organization=org, created_at__gte=since, platform_failed=False
    )


# The daily cap counts the runs launched within this window (BELVEDIR_RUNS_PER_DAY_CAP).
DAILY_CAP_HOURS = 24


def _seconds_until_a_daily_slot(*, org: Organization, since, over: int) -> int:
    """Seconds until enough of the daily cap window's counted runs age out for one more launch."""
    created = (
        _launches_counted(org=org, since=since)
        .order_by("created_at")
        .values_list("created_at", flat=True)[over]
    )
    return max(1, math.ceil((created - since).total_seconds()))


def run_launch(
    *,
    project: Project,
    harness: Harness,
    created_by=None,
    model: str = "",
    model_api_base: str = "",
    model_api_key: str = "",
    judge_model: str = "",
    judge_api_base: str = "",
    judge_api_key: str = "",
    attempts: int = 1,
    grading: str = Grading.PASS_AT_1,
    fine_tuned_model: FineTunedModel | None = None,
) -> Run:
    """Check, count under a row lock, create the run and its key, enqueue on commit.

    With `fine_tuned_model` (see `run_launch_fine_tuned`) the run's model is the fine-tuned
    model's name and the sandbox serves its base id with the adapter."""
    check_launch_input(harness=harness, attempts=attempts, grading=grading)
    managed.managed_launch_check(harness=harness, organization=project.organization)
    if fine_tuned_model is not None:
        check_fine_tuned(project=project, harness=harness, fine_tuned_model=fine_tuned_model)
        model = fine_tuned_model.name
    for name, value in [("model_api_base", model_api_base), ("judge_api_base", judge_api_base)]:
        if value and not re.match(r"^https?://", value):
            raise Invalid(f"{name} must be an http(s) URL.", field=name)
    harness_env = env_secrets.env_plain(harness.env or {}, harness.env_secrets_encrypted)
    if not judge_model.strip() and not str(harness_env.get("JUDGE_MODEL") or "").strip():
        # A judged card's harness whose JUDGE_MODEL was left blank: the platform's default.
        judge_model, _ = default_judge(preset=harness.preset, harness_env=harness_env)
    access = model_access_check(
        project=project,
        gpu=harness.compute == Compute.GPU,
        harness_env=harness_env,
        model=fine_tuned_model.base_model if fine_tuned_model else model,
        model_api_base=model_api_base,
        model_api_key=model_api_key,
        judge_model=judge_model,
        judge_api_base=judge_api_base,
        judge_api_key=judge_api_key,
        model_called=not managed.calls_no_model(
            repo_url=harness.repo_url, preset=harness.preset, env=harness_env
        ),
    )
    launch_ready()
    repo_check(repo_url=harness.repo_url, ref=harness.ref)
    with transaction.atomic():
        org = Organization.objects.select_for_update().get(pk=project.organization_id)
        in_flight = Run.objects.filter(project__organization=org, status__in=IN_FLIGHT).count()
        cap = settings.BELVEDIR_RUNS_IN_FLIGHT_CAP
        if in_flight >= cap:
            raise LimitReached(
                f"Your organization already has {counted(in_flight, 'run')} in flight "
                f"(the limit is {cap}); "
                "wait for one to finish or cancel one.",
                code="cap_in_flight",
            )
        day_cap = settings.BELVEDIR_RUNS_PER_DAY_CAP
        since = timezone.now() - timedelta(hours=DAILY_CAP_HOURS)
        recent = _launches_counted(org=org, since=since).count()
        if recent >= day_cap:
            raise LimitReached(
                f"Your organization launched {counted(recent, 'run')} in the last {DAILY_CAP_HOURS} hours "
                f"(the limit is {day_cap}; runs the platform failed are not counted); "
                "try again later.",
                code="cap_daily",
                retry_after=_seconds_until_a_daily_slot(
                    org=org, since=since, over=recent - day_cap
                ),
            )
        run = Run.objects.create(
            project=project,
            harness=harness,
            harness_name=harness.name,
            harness_snapshot={f: getattr(harness, f) for f in HARNESS_FIELDS},
            tasks_md5=hashlib.md5(harness.tasks.encode()).hexdigest(),
            harness_env_secrets_encrypted=harness.env_secrets_encrypted,
            enqueued_at=timezone.now(),
            model=model.strip() or str((harness.env or {}).get("MODEL", "")),
            model_api_base=model_api_base.strip(),
            model_api_key_encrypted=crypto.encrypt(model_api_key.strip()),
            judge_model=judge_model.strip(),
            judge_api_base=judge_api_base.strip(),
            judge_api_key_encrypted=crypto.encrypt(judge_api_key.strip()),
            model_api_base_resolved=access.model.api_base,
            judge_api_base_resolved=access.judge.api_base,
            model_covered=access.model.covered,
            judge_covered=access.judge.covered,
            model_proxied=access.model.proxied,
            judge_proxied=access.judge.proxied,
            covered=access.covered,
            covered_cap_micros=settings.BELVEDIR_COVERED_SPEND_CAP_MICROS if access.covered else 0,
            attempts=attempts,
            grading=grading,
            fine_tuned_model=fine_tuned_model,
            model_base=fine_tuned_model.base_model if fine_tuned_model else "",
            gpu_type=(harness.gpu_type or DEFAULT_GPU_TYPE)
            if harness.compute == Compute.GPU
            else "",
            created_by=created_by,
        )
        # Under the organization's lock: concurrent launches see each other's charges.
        billing.run_charge(
            organization=org,
            reference=run.pk,
            gpu=harness.compute == Compute.GPU,
            created_by=created_by,
        )
        run.ingest_key, run_key = api_key_create(
            project=project,
            name=f"run {run.pk}",
            kind=ApiKey.Kind.RUN,
            created_by=created_by,
        )
        run.run_key_encrypted = crypto.encrypt(run_key)
        run.save(update_fields=["ingest_key", "run_key_encrypted"])
        audit.audit_record(
            action=audit.RUN_LAUNCH,
            organization=org,
            target=run.pk,
            metadata={"harness": harness.pk, "model": run.model},
        )
        transaction.on_commit(lambda: run_enqueue(run_id=run.pk))
    return run


def run_relaunch(*, run: Run, created_by=None) -> Run:
    """Launch `run`'s harness again with the run's settings: its model, judge, attempts and
    grading, and the keys it was given (reused from storage, never shown or asked again).
    The harness runs as it is now; every launch check and cap applies."""
    if run.harness is None:
        raise Invalid(
            "This run's harness was deleted, so it cannot run again.",
            field="harness",
            code="harness_deleted",
        )
    secrets = run_model_secrets(run)
    return run_launch(
        project=run.harness.project,
        harness=run.harness,
        created_by=created_by,
        model=run.model,
        model_api_base=run.model_api_base,
        model_api_key=secrets["model_api_key"],
        judge_model=run.judge_model,
        judge_api_base=run.judge_api_base,
        judge_api_key=secrets["judge_api_key"],
        attempts=run.attempts,
        grading=run.grading,
        fine_tuned_model=_fine_tuned_of(run),
    )


def _fine_tuned_of(run: Run) -> FineTunedModel | None:
    if run.model_base and run.fine_tuned_model is None:
        raise Invalid(
            "This run's fine-tuned model was deleted, so it cannot run again.",
            field="model",
            code="model_deleted",
        )
    return run.fine_tuned_model


def run_launch_fine_tuned(
    *,
    fine_tuned_model: FineTunedModel,
    harness: Harness,
    created_by=None,
    attempts: int = 1,
    grading: str = Grading.PASS_AT_1,
) -> Run:
    """Run benchmark (the Models page): `harness` (a GPU harness) against the model. The
    sandbox gets MODEL (the base id), ADAPTER_URL, MODEL_LABEL and HF_TOKEN for a gated base."""
    return run_launch(
        project=fine_tuned_model.project,
        harness=harness,
        created_by=created_by,
        attempts=attempts,
        grading=grading,
        fine_tuned_model=fine_tuned_model,
    )


def run_enqueue(*, run_id: str) -> None:
    """Queue the run's task. Its place in the queue (`enqueued_at`, set at launch) stays: a
    requeued run keeps the position it had."""
    Run.objects.filter(pk=run_id, enqueued_at__isnull=True).update(enqueued_at=timezone.now())
    gpu_type = Run.objects.filter(pk=run_id).values_list("gpu_type", flat=True).first()
    run_task_enqueue(run_id=run_id, cluster=gpu.queue_name(gpu_type) if gpu_type else None)


def run_claim(*, run_id: str, worker: str, gpu_device: str = "", engine: str = "") -> bool:
    """Atomically move a queued run to running; False if someone else has it (or it was cancelled).
    `gpu_device`: the GPU it runs on (host/device id), already held for it; `engine`: the
    worker host and Docker engine its sandbox will run on."""
    return _claim(
        run_id=run_id, worker=worker, gpu_device=gpu_device, engine=engine, now=timezone.now()
    )


@reconnecting
def _claim(*, run_id: str, worker: str, gpu_device: str, engine: str, now: datetime) -> bool:
    claimed = Run.objects.filter(pk=run_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        started_at=now,
        heartbeat_at=Now(),  # the database's clock: the reapers on other hosts compare with it
        worker=worker,
        engine=engine,
        gpu_device=gpu_device,
        stage=Stage.CLONING,
        stage_started_at=now,
    )
    if claimed == 1:
        return True
    # A try whose connection broke after the commit: the run is already ours.
    return Run.objects.filter(
        pk=run_id, status=Status.RUNNING, worker=worker, started_at=now
    ).exists()


@reconnecting
def run_mark_running(*, run_id: str, container_id: str) -> bool:
    """The run's sandbox was launched; False once the run is no longer running."""
    return (
        Run.objects.filter(pk=run_id, status=Status.RUNNING).update(container_id=container_id) == 1
    )


@reconnecting
def run_stage_advance(*, run_id: str, stage: str) -> bool:
    """The running run reached `stage`; stages only move forward (a late or repeated report of
    an earlier one changes nothing). False when nothing changed."""
    earlier = ["", *STAGES[: STAGES.index(stage)]]
    return (
        Run.objects.filter(pk=run_id, status=Status.RUNNING, stage__in=earlier).update(
            stage=stage, stage_started_at=timezone.now()
        )
        == 1
    )


@reconnecting
def run_heartbeat(*, run_id: str, log_tail: str | None = None, log_size: int | None = None) -> bool:
    """The worker is alive (and the log so far); False once the run is no longer running."""
    fields = {"heartbeat_at": Now()}  # the database's clock, as the reapers' cutoff
    if log_tail is not None:
        fields["log_tail"] = log_tail
        fields["log_size"] = log_size
    return Run.objects.filter(pk=run_id, status=Status.RUNNING).update(**fields) == 1


@reconnecting
def run_store_log(*, run_id: str, log_tail: str, log_size: int) -> None:
    """The final log of a run that ended by other hands (cancelled while it ran)."""
    Run.objects.filter(pk=run_id).update(log_tail=log_tail, log_size=log_size)


@reconnecting
def run_finish(
    *,
    run_id: str,
    status: str,
    score: float | None = None,
    results: dict | None = None,
    notes: list[str] | None = None,
    exit_code: int | None = None,
    log_tail: str | None = None,
    log_size: int | None = None,
    heartbeat_before: datetime | Combinable | None = None,
    platform_failed: bool = False,
    traces_incomplete: bool = False,
) -> bool:
    """End a running run (once): store the outcome, revoke its key. False if it had already ended.

    `heartbeat_before`: only if its last heartbeat is older (the reaper's condition, re-checked
    in the update itself, so a worker that beats again in between keeps its run).
    `platform_failed`: it failed through the platform's fault (`Run.platform_failed`), so the
    24-hour launch cap does not count it.
    `traces_incomplete`: its output said spans were dropped (`Run.traces_incomplete`; only
    ever set here, never cleared: the router may have set it already).
    """
    fields = {
        "status": status,
        "platform_failed": platform_failed,
        "score": score,
        "results": results,
        "exit_code": exit_code,
        "finished_at": timezone.now(),
        "notes": list(notes or []),
    }
    if traces_incomplete:
        fields["traces_incomplete"] = True
    if status == Status.SUCCEEDED:
        for succeeding in hooks.run_succeeding:  # scores: the score's interval (runs/hooks.py)
            fields.update(succeeding(run_id, score, results))
    if log_tail is not None:
        fields["log_tail"] = log_tail
        fields["log_size"] = log_size
    runs = Run.objects.filter(pk=run_id, status__in=IN_FLIGHT)
    if heartbeat_before is not None:
        runs = runs.filter(heartbeat_at__lt=heartbeat_before)
    with transaction.atomic():
        done = runs.update(**fields)
        if done or heartbeat_before is None:
            run_keys_revoke(run_id=run_id)
        if done:
            _refund_if_never_launched(run_id=run_id)
    if done or heartbeat_before is None:
        _ended(run_id=run_id)
    return done == 1


def _ended(*, run_id: str) -> None:
    """What the apps above runs do when a run ends (runs/hooks.py: harbor stops its task
    sandboxes, so none outlive the run)."""
    for ended in hooks.run_ended:
        ended(run_id)


def _refund_if_never_launched(*, run_id: str) -> None:
    """Give back the run's price when its sandbox never launched (a clone failure, an image
    or engine error, cancelled before it started): it has no container."""
    run = Run.objects.filter(pk=run_id).values("container_id", "project__organization_id").first()
    if run is not None and not run["container_id"]:
        billing.run_refund(organization_id=run["project__organization_id"], reference=run_id)


def run_keys_revoke(*, run_id: str) -> None:
    for key in ApiKey.objects.filter(ingest_run__pk=run_id, revoked_at__isnull=True):
        api_key_revoke(key=key)


def runs_delete(*, runs: QuerySet[Run]) -> int:
    """Delete runs together with their per-run keys (a run's key is only ever that run's)."""
    with transaction.atomic():
        key_ids = list(runs.exclude(ingest_key=None).values_list("ingest_key_id", flat=True))
        deleted, _ = runs.delete()
        ApiKey.objects.filter(pk__in=key_ids, kind=ApiKey.Kind.RUN).delete()
    return deleted


def run_cancel(*, run: Run) -> Run:
    """Cancel a queued or running run: marked at once, its sandbox killed within seconds."""
    if run.is_terminal:
        raise Invalid(f"The run has already {run.status}.", field="status")
    now = timezone.now()
    note = "belvedir: cancelled by request."
    with transaction.atomic():
        updated = Run.objects.filter(pk=run.pk, status__in=IN_FLIGHT).update(
            status=Status.CANCELLED, cancel_requested_at=now, finished_at=now
        )
        if updated:
            locked = Run.objects.select_for_update().get(pk=run.pk)
            locked.notes = [*locked.notes, note]
            locked.save(update_fields=["notes"])
            run_keys_revoke(run_id=run.pk)
            _refund_if_never_launched(run_id=run.pk)
            audit.audit_record(
                action=audit.RUN_CANCEL,
                organization=run.project.organization,
                target=run.pk,
                metadata={"status_before": run.status},
            )
    if updated:
        try:
            kill_run_sandboxes(get_backend(), run.pk)
        except SandboxError:
            pass  # the executor and the reaper remove it too
        _ended(run_id=run.pk)
    run.refresh_from_db()
    return run
