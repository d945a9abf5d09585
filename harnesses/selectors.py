"""Harness reads. Lists take the project (views pass `access.project`)."""

from django.db.models import QuerySet

from belvedir.models import Project
from harnesses.models import Harness


def harnesses_for(*, project: Project) -> QuerySet[Harness]:
    """The project's harnesses, newest first."""
    return Harness.objects.filter(project=project)
