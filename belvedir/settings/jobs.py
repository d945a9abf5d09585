"""django-q2: the clusters, their queues and time limits."""

from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envgpus, envint
from belvedir.settings.database import REDIS_URL

# django-q2: the ORM broker by default, Redis when REDIS_URL is set. Two clusters, one queue
# each, started with Q_CLUSTER_NAME: "runs" executes runs (Q_WORKERS at a time; more wait
# queued), "housekeeping" runs the schedules (the reaper, the task former), so those never wait
# behind runs.
Q_RUNS_CLUSTER = "runs"
Q_HOUSEKEEPING_CLUSTER = "housekeeping"
Q_CLUSTER = {
    "name": "belvedir",
    "ALT_CLUSTERS": {
        Q_RUNS_CLUSTER: {},
        Q_HOUSEKEEPING_CLUSTER: {
            "workers": envint("Q_HOUSEKEEPING_WORKERS", 2, minimum=1),
            "timeout": 600,
            "retry": 660,
        },
        # One queue per GPU type (gpu-a10g, …), one worker per device of the type.
        **{
            f"gpu-{kind.lower()}": {"workers": count}
            for kind, count in envgpus("BELVEDIR_GPU_TYPES").items()
        },
    },
    "workers": envint("Q_WORKERS", 8, minimum=1),
    # Tasks a cluster takes off the shared queue beyond its busy workers (one more is in its
    # pusher's hand). django-q2's default, workers², lets a busy host hold 64 runs another
    # host could start; 1 keeps the rest in the queue for whichever host frees up first.
    "queue_limit": envint("Q_QUEUE_LIMIT", 1, minimum=1),
    "timeout": envint("Q_TIMEOUT", 5400, minimum=10),
    "retry": envint("Q_RETRY", 5700, minimum=20),
    "max_attempts": 1,
    "poll": 0.2,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 500,
    "label": "Django Q2",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
if Q_CLUSTER["timeout"] >= Q_CLUSTER["retry"]:
    raise ImproperlyConfigured("Q_TIMEOUT must be below Q_RETRY")
# `manage.py qcluster` (runs/management/commands/qcluster.py): after a SIGTERM, runs in flight
# may finish for this many seconds before the cluster stops them (0: as long as they take; a
# second SIGTERM stops them at once). A stopped run is failed or requeued by the reaper.
Q_STOP_GRACE = envint("Q_STOP_GRACE", 0, minimum=0)
