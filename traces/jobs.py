"""django-q2 entry points for traces."""

from django.conf import settings

from traces.services.task_forming import quiet_sessions_form


def form_tasks() -> int:
    return quiet_sessions_form(quiet_seconds=settings.BELVEDIR_TASKS_QUIET_SECONDS)
