"""Worker hosts: each host's clusters report it (`host_beat`, with the reaper's every pass), so a
web host with no Docker engine of its own knows whether any host can run a launch.

A host is ready while its report is fresher than BELVEDIR_HEARTBEAT_STALE and names no
isolation problem. Launches check the web host's own engine and isolation first (one host, or
development); only when those fail do they accept a ready worker host instead. A worker still
checks its own isolation before it starts a run.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models.functions import Now

from belvedir.db import reconnecting
from belvedir.isolation import isolation_status
from belvedir.sandbox_config import engine_name, worker_host
from runs.models import WorkerHost


@reconnecting
def host_beat() -> WorkerHost:
    """Record this host as alive now, with its engine and its isolation problems (if any)."""
    host, _ = WorkerHost.objects.update_or_create(
        name=worker_host(),
        defaults={
            "engine": engine_name(),
            "seen_at": Now(),  # the database's clock: the web hosts compare with it
            "problems": list(isolation_status().problems),
        },
    )
    host.refresh_from_db(fields=["seen_at"])  # the time the database gave it
    return host


def hosts_ready() -> list[WorkerHost]:
    """Worker hosts seen within BELVEDIR_HEARTBEAT_STALE with isolation in place."""
    since = Now() - timedelta(seconds=settings.BELVEDIR_HEARTBEAT_STALE)  # the database's clock
    return [host for host in WorkerHost.objects.filter(seen_at__gte=since) if not host.problems]
