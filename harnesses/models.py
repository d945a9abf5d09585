from django.conf import settings
from django.db import models
from django.utils import timezone

from belvedir import ids


class Compute(models.TextChoices):
    CPU = "cpu", "CPU"
    GPU = "gpu", "GPU"


GPU_TYPES = ["A10G", "L4", "A100", "H100"]


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
