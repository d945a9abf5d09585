"""Harness reads. Lists take the project (views pass `access.project`)."""

from django.db.models import QuerySet

from belvedir.models import Project
from harnesses.models import Environment, EnvironmentGeneration, Harness


def harnesses_for(*, project: Project) -> QuerySet[Harness]:
    """The project's harnesses, newest first."""
    return Harness.objects.filter(project=project)


def environments_for(*, project: Project) -> QuerySet[Environment]:
    """The project's environments, most recently changed first."""
    return Environment.objects.filter(project=project)


def generations_pending(*, project: Project) -> QuerySet[EnvironmentGeneration]:
    """The project's generations not saved yet: running, or done and waiting for review."""
    return EnvironmentGeneration.objects.filter(
        project=project,
        environment__isnull=True,
        status__in=[
            EnvironmentGeneration.Status.QUEUED,
            EnvironmentGeneration.Status.RUNNING,
            EnvironmentGeneration.Status.SUCCEEDED,
        ],
    )
