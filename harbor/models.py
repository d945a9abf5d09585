"""The managed Harbor workspace's rows: one per task container of a managed Harbor run."""

from django.db import models
from django.utils import timezone

from belvedir import ids


class TaskSandboxStatus(models.TextChoices):
    WARM = "warm", "Warm"  # started ahead for its run, no task's yet (harbor/warm.py)
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    STOPPED = "stopped", "Stopped"
    FAILED = "failed", "Failed"


class TaskSandbox(models.Model):
    """One task container of a managed Harbor run (docs/task-sandboxes.md): built from the
    task's environment directory, started for the run, stopped by the driver or when the run
    ends. Its time is charged to the organization once it stops (`charged_micros`)."""

    Status = TaskSandboxStatus

    id = models.CharField(
        primary_key=True, max_length=32, default=ids.task_sandbox_id, editable=False
    )
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="task_sandboxes")
    name = models.CharField(max_length=200)
    image = models.CharField(max_length=200, blank=True)
    cached = models.BooleanField(default=False)  # the image was already built
    container_id = models.CharField(max_length=80, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.STARTING)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    charged_micros = models.BigIntegerField(default=0)
    charged = models.BooleanField(default=False)

    ALIVE = ("warm", "starting", "running")

    class Meta:
        # The table runs made before harbor/ was its own app (harbor's 0001, runs' 0024): the
        # model moved, the rows stayed where they were.
        db_table = "runs_tasksandbox"
        ordering = ["-created_at"]
        verbose_name_plural = "task sandboxes"
        indexes = [
            models.Index(fields=["run", "status"], name="runs_tasksa_run_id_2fd14a_idx"),
            # The reaper's pass looks for stopped ones never charged: only the few uncharged
            # rows (running, or stopped and not yet settled), not every task sandbox ever.
            models.Index(
                fields=["stopped_at"],
                condition=models.Q(charged=False),
                name="task_sandbox_uncharged",
            ),
            # The reaper's pass asks when each old task image was last used.
            models.Index(fields=["image", "created_at"], name="task_sandbox_image_used"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.name})"

    @property
    def is_alive(self) -> bool:
        return self.status in self.ALIVE
