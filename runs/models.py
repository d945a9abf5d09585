import hashlib

from django.conf import settings
from django.db import models
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from belvedir import ids
from belvedir.models import Organization
from billing.models import SpendCapped


class Status(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


IN_FLIGHT = [Status.QUEUED, Status.RUNNING]
TERMINAL = [Status.SUCCEEDED, Status.FAILED, Status.CANCELLED]


MAX_ATTEMPTS = 100  # attempts per task a run may ask for


class Stage(models.TextChoices):
    """Where a running run is, in order (blank: not started)."""

    CLONING = "cloning", "Cloning the repo"
    INSTALLING = "installing", "Installing"
    RUNNING = "running", "Running"
    COLLECTING = "collecting", "Collecting results"


STAGES = [Stage.CLONING, Stage.INSTALLING, Stage.RUNNING, Stage.COLLECTING]


class Grading(models.TextChoices):
    PASS_AT_1 = "pass@1", "pass@1"
    PASS_AT_K = "pass@k", "pass@k"
    MEAN = "mean", "mean"


class Run(SpendCapped):
    id = models.CharField(primary_key=True, max_length=32, default=ids.run_id, editable=False)
    project = models.ForeignKey("belvedir.Project", on_delete=models.CASCADE, related_name="runs")
    harness = models.ForeignKey(
        "harnesses.Harness", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    harness_name = models.CharField(max_length=120)
    # The harness as it was at launch: a later edit does not change a queued run.
    harness_snapshot = models.JSONField(default=dict)
    # The snapshot's secret env values (harnesses.env_secrets), encrypted.
    harness_env_secrets_encrypted = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    model = models.CharField(max_length=200, blank=True)
    model_api_base = models.CharField(max_length=500, blank=True)
    model_api_key_encrypted = models.TextField(blank=True)
    judge_model = models.CharField(max_length=200, blank=True)
    judge_api_base = models.CharField(max_length=500, blank=True)
    judge_api_key_encrypted = models.TextField(blank=True)
    # Launched against a fine-tuned model (the Models page): the sandbox gets MODEL = the base
    # id kept here, ADAPTER_URL, MODEL_LABEL = `model` (the model's name) and HF_TOKEN for a
    # gated base. The link is cleared when the model is deleted; `model_base` stays.
    fine_tuned_model = models.ForeignKey(
        "models_registry.FineTunedModel",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    model_base = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    grading = models.CharField(max_length=8, choices=Grading.choices, default=Grading.PASS_AT_1)
    score = models.FloatField(null=True, blank=True)
    # The score's standard error and 95% interval over its per-task results (scores/stats.py,
    # stored with a succeeded run's end by scores through runs/hooks.py); null without, and
    # then score_interval_note says why in a sentence (blank for a run that did not succeed).
    score_stderr = models.FloatField(null=True, blank=True)
    score_ci_low = models.FloatField(null=True, blank=True)
    score_ci_high = models.FloatField(null=True, blank=True)
    n_tasks = models.PositiveIntegerField(null=True, blank=True)
    score_interval_note = models.TextField(blank=True, default="")
    # MD5 of the Tasks field it launched with (its snapshot's): the leaderboards rank together
    # only runs of one task set, without reading each run's snapshot.
    tasks_md5 = models.CharField(max_length=32, default=hashlib.md5(b"").hexdigest())
    results = models.JSONField(null=True, blank=True)
    notes = models.JSONField(default=list, blank=True)
    log_tail = models.TextField(blank=True)
    # Bytes of output ever written; the tail covers the last len(log_tail) of them.
    log_size = models.BigIntegerField(default=0)
    run_key_encrypted = models.TextField(blank=True)
    # The run's own key (trace ingest, its Tasks file): the run owns the link, so the core app
    # (a lower floor) never points at runs.
    ingest_key = models.OneToOneField(
        "belvedir.ApiKey",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="ingest_run",
    )
    exit_code = models.IntegerField(null=True, blank=True)
    container_id = models.CharField(max_length=80, blank=True)
    worker = models.CharField(max_length=120, blank=True)
    # The worker host and Docker engine the run was claimed on ("host unix:///…sock"): where
    # its sandbox lives (belvedir.sandbox_config.engine_name).
    engine = models.CharField(max_length=300, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Failed through the platform's fault, the user's code given no fair go: its worker stopped
    # responding, its sandbox could not start or the engine failed (the worker's disk too
    # full, a missing image), isolation was not in place, the Tasks file never arrived, an
    # internal error. The 24-hour launch cap does not count these runs.
    platform_failed = models.BooleanField(default=False)
    # Some of the run's spans never reached its session: the SDK or a driver said "spans
    # dropped" in the run's output, or the router could not store a call's span. Its trace
    # (call counts, tokens) is short; the run page shows a warning badge.
    traces_incomplete = models.BooleanField(default=False)
    # The step a run is in (or, once it ended, the last one it reached), and since when.
    stage = models.CharField(max_length=12, choices=Stage.choices, blank=True)
    stage_started_at = models.DateTimeField(null=True, blank=True)
    # Covered model usage (the router): `covered` and the covered_* money columns of
    # billing.models.SpendCapped, reserved and settled by billing.spend.
    # What the launch decided (runs.model_access): the bases (a blank one resolved from the model
    # id; the router if covered), which usage is covered, which own-key usage the router proxies.
    model_api_base_resolved = models.CharField(max_length=500, blank=True)
    judge_api_base_resolved = models.CharField(max_length=500, blank=True)
    model_covered = models.BooleanField(default=False)
    judge_covered = models.BooleanField(default=False)
    model_proxied = models.BooleanField(default=False)
    judge_proxied = models.BooleanField(default=False)
    # GPU runs: the harness's GPU type at launch (its queue), and the device that ran it
    # ("host/device id"); blank for CPU runs.
    gpu_type = models.CharField(max_length=16, blank=True)
    gpu_device = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["project", "status"]),
            models.Index(fields=["status", "heartbeat_at"]),
            # My Benchmarks (newest first), a harness's runs, the score charts (newest scored)
            models.Index(fields=["project", "-created_at"], name="run_project_newest"),
            models.Index(fields=["harness", "-created_at"], name="run_harness_newest"),
            models.Index(fields=["project", "-finished_at", "-id"], name="run_project_finished"),
            # A fine-tuned model's runs are also those reporting its name as results.model:
            # without this, that arm of the OR scans every run of the project's JSON.
            models.Index(
                models.F("project"), KeyTransform("model", "results"), name="run_results_model"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    status__in=["queued", "running", "succeeded", "failed", "cancelled"]
                ),
                name="run_status_valid",
            ),
            # The router releases a reservation once per call: never more than was reserved.
            models.CheckConstraint(
                condition=models.Q(covered_reserved_micros__gte=0),
                name="run_covered_reserved_not_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(attempts__gte=1), name="run_attempts_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.harness_name}, {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None


class GpuDevice(models.Model):
    """One GPU of a worker host (BELVEDIR_GPU_TYPES), and the run holding it, if any.

    A run holds its device while it runs and renews the lease with every heartbeat; a device
    whose lease is older than BELVEDIR_HEARTBEAT_STALE (its worker was killed) is free again.
    """

    host = models.CharField(max_length=120)
    gpu_type = models.CharField(max_length=16)
    device_id = models.CharField(max_length=64)  # what Docker's device request names
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="gpu_devices"
    )
    held_at = models.DateTimeField(null=True, blank=True)  # the lease, renewed by heartbeats
    registered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["host", "gpu_type", "device_id"]
        constraints = [
            models.UniqueConstraint(fields=["host", "device_id"], name="gpu_device_unique"),
        ]
        verbose_name = "GPU device"

    def __str__(self) -> str:
        return f"{self.gpu_type} {self.host}/{self.device_id}"


class WorkerHost(models.Model):
    """A worker host as its clusters last reported it (runs.hosts): its Docker engine, when it
    was last seen, and what keeps its sandboxes from being isolated, if anything. A web host
    with no engine of its own accepts launches while some worker host is fresh and isolated."""

    name = models.CharField(max_length=120, unique=True)  # BELVEDIR_WORKER_HOST
    engine = models.CharField(max_length=300)  # belvedir.sandbox_config.engine_name
    seen_at = models.DateTimeField(default=timezone.now)
    problems = models.JSONField(default=list, blank=True)  # isolation problems: none = ready

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.engine


class OrganizationSpend(Organization):
    """An organization seen from its runs: what the platform paid for the model usage it
    covered (the router's metered spend), which is never charged to the organization.
    Only the admin uses it."""

    class Meta:
        proxy = True
        verbose_name = "covered model spend"
        verbose_name_plural = "covered model spend by organization"
