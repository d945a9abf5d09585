"""Upsert the django-q2 schedules in code: the run reaper and the trace task-former.

They run on the "housekeeping" cluster (Q_CLUSTER_NAME=housekeeping), never behind runs.
"""

from django.conf import settings
from django.core.management.base import BaseCommand
from django_q.models import Schedule

SCHEDULES = [
    # (name, func, minutes)
    ("reap runs", "runs.jobs.reap", 1),
    ("form trace tasks", "traces.jobs.form_tasks", 1),
]


class Command(BaseCommand):
    help = "Create or update the platform's periodic jobs."

    def handle(self, *args, **options):
        for name, func, minutes in SCHEDULES:
            Schedule.objects.update_or_create(
                name=name,
                defaults={
                    "func": func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": minutes,
                    "repeats": -1,
                    "cluster": settings.Q_HOUSEKEEPING_CLUSTER,
                },
            )
            self.stdout.write(f"schedule {name!r}: {func} every {minutes} min")
