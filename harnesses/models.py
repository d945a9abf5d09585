from django.conf import settings
from django.db import models
from django.utils import timezone

from belvedir import ids
from billing.models import SpendCapped


class Compute(models.TextChoices):
    CPU = "cpu", "CPU"
    GPU = "gpu", "GPU"


GPU_TYPES = ["A10G", "L4", "A100", "H100"]
# A GPU harness that names no type runs on this one.
DEFAULT_GPU_TYPE = "A10G"


class Harness(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=ids.harness_id, editable=False)
    project = models.ForeignKey(
        "belvedir.Project", on_delete=models.CASCADE, related_name="harnesses"
    )
    name = models.CharField(max_length=120)
    repo_url = models.CharField(max_length=500)
    ref = models.CharField(max_length=200, blank=True)
    install_command = models.TextField(blank=True)
    run_command = models.TextField()
    env = models.JSONField(default=dict, blank=True)
    # Env values whose names mark them as secrets (harnesses.env_secrets), encrypted.
    env_secrets_encrypted = models.TextField(blank=True)
    compute = models.CharField(max_length=3, choices=Compute.choices, default=Compute.CPU)
    gpu_type = models.CharField(max_length=16, blank=True)
    tasks = models.TextField(blank=True)
    preset = models.CharField(max_length=64, blank=True)
    # The environment (and its version) whose tasks a harness was made from; its Tasks field
    # keeps that version's tasks when the environment changes or is deleted.
    environment = models.ForeignKey(
        "harnesses.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="harnesses",
    )
    environment_version = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "harnesses"
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name"], name="harness_name_unique_in_project"
            ),
            models.CheckConstraint(
                condition=models.Q(compute__in=["cpu", "gpu"]), name="harness_compute_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Environment(models.Model):
    """A task set (harnesses.tasks_format): authored, imported or generated; each change is a
    new EnvironmentVersion, and `version` is the number of the current one."""

    id = models.CharField(
        primary_key=True, max_length=32, default=ids.environment_id, editable=False
    )
    project = models.ForeignKey(
        "belvedir.Project", on_delete=models.CASCADE, related_name="environments"
    )
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    task_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name"], name="environment_name_unique_in_project"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class EnvironmentVersion(models.Model):
    """One saved state of an environment: its name, description and tasks as they were."""

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    tasks = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["environment", "number"], name="environment_version_number_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.environment_id} v{self.number}"


class EnvironmentGeneration(SpendCapped):
    """A request to generate an environment's tasks from a description with a model, run as a
    background job; its tasks are a preview until the user saves them as an environment.
    A covered one (no key of the user's) spends platform money under its own cap, reserved and
    settled per call by billing.spend like a covered run's."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    id = models.CharField(
        primary_key=True, max_length=32, default=ids.generation_id, editable=False
    )
    project = models.ForeignKey(
        "belvedir.Project", on_delete=models.CASCADE, related_name="environment_generations"
    )
    name = models.CharField(max_length=120, blank=True)
    description = models.TextField()
    count = models.PositiveSmallIntegerField(default=5)
    model = models.CharField(max_length=200)
    api_base = models.CharField(max_length=500, blank=True)
    # The user's model key, encrypted (belvedir.crypto); blank when the platform covers the model.
    api_key_encrypted = models.TextField(blank=True)
    preset = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.CharField(max_length=200, blank=True)
    tasks = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    environment = models.ForeignKey(
        Environment, null=True, blank=True, on_delete=models.SET_NULL, related_name="generations"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # billing.spend releases a reservation once per call: never more than was reserved.
            models.CheckConstraint(
                condition=models.Q(covered_reserved_micros__gte=0),
                name="generation_covered_reserved_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)


class InstallSnapshot(models.Model):
    """An install snapshot a worker host keeps of a harness's install (harnesses.install_cache;
    the files are sandboxes.installcache's, on that host). A run finds one only through its
    row: clearing a harness's cache deletes its rows, and each host's reaper then deletes the
    files no row names."""

    organization = models.ForeignKey(
        "belvedir.Organization", on_delete=models.CASCADE, related_name="install_snapshots"
    )
    harness = models.ForeignKey(Harness, on_delete=models.CASCADE, related_name="install_snapshots")
    host = models.CharField(max_length=300)  # the worker host's engine (runs' `engine`)
    key = models.CharField(max_length=64)  # the full key: its parts are hashed
    run_id = models.CharField(max_length=32)  # the run whose install it is
    size_bytes = models.BigIntegerField(default=0)  # what it takes on the host's disk
    reused = models.PositiveIntegerField(default=0)  # runs started from it
    created_at = models.DateTimeField(default=timezone.now)
    used_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-used_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "organization", "key"], name="install_snapshot_unique_on_host"
            )
        ]

    def __str__(self) -> str:
        return f"{self.harness_id} from {self.run_id} on {self.host}"
