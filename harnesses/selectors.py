"""Harness reads. Lists take the project (views pass `access.project`)."""

from django.db.models import QuerySet

from belvedir.models import Project
from harnesses.models import Environment, Harness


def harnesses_for(*, project: Project) -> QuerySet[Harness]:
    """The project's harnesses, newest first."""
    return Harness.objects.filter(project=project)


def environments_for(*, project: Project) -> QuerySet[Environment]:
    """The project's environments, most recently changed first."""
    return Environment.objects.filter(project=project)
