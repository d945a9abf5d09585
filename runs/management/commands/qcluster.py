"""`manage.py qcluster`: django-q2's cluster, with a stop that neither hangs nor orphans workers.

- The first SIGTERM (or SIGINT) stops taking tasks. An idle cluster exits within seconds; a
  run in flight is let finish (its worker is busy until the run ends, which the run timeout
  bounds), unless Q_STOP_GRACE seconds pass first.
- A second SIGTERM/SIGINT, or the end of Q_STOP_GRACE: stop now. Every process of the
  cluster is killed; a run that was in flight stops sending heartbeats, and the reaper (the
  housekeeping cluster) fails it with a `belvedir:` note and removes its sandbox.
- When the main process exits, no process it started is left running.

The housekeeping cluster queues its due schedules (the reaper, the task former) once as it
starts, not only at django-q2's first timed pass 30 s later: a restarted housekeeping cluster
reaps lost runs at once.

A runs or GPU cluster also reaps on its own host, once before it takes a task and then every
BELVEDIR_REAP_SECONDS (`HostReaper`):
each worker host's engine then has its orphan sandboxes removed by that host, and a vanished
host's runs are failed by the hosts still there, whichever host runs the housekeeping cluster.
"""

import logging
import os
import signal
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import close_old_connections, connection
from django_q.cluster import Cluster
from django_q.management.commands import qcluster
from django_q.scheduler import scheduler

from belvedir.gpu_host import gpu_host_check, refusal
from runs import gpu, hosts, reaper

log = logging.getLogger(__name__)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children…), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it exited while we looked
            continue
        # pid (comm) state ppid …: comm may hold spaces, so split after its ")".
        state, ppid = text[text.rindex(")") + 2 :].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class StoppableCluster(Cluster):
    """A Cluster whose second stop signal (or a grace timeout) kills its processes."""

    def __init__(self, *args, grace: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.grace = grace
        self.stopping = False
        signal.signal(signal.SIGALRM, self.stop_now)

    def sig_handler(self, signum, frame):
        if self.stopping:  # asked again while the workers finish: stop now
            self.stop_now(signum, frame)
            return
        self.stopping = True
        if self.grace:
            signal.alarm(self.grace)
        log.info("qcluster: stopping; runs in flight finish (signal again to stop now)")
        # Not in this handler: stop() sets an Event whose lock a process killed by the same
        # signal (a SIGTERM to the whole group) may have held, and would then wait forever.
        # The main loop (Command.handle) ends when the sentinel does, either way.
        threading.Thread(target=self.stop, name="qcluster-stop", daemon=True).start()

    def stop_now(self, signum=None, frame=None):
        pids = descendants(self.pid)  # collected first: a killed sentinel's children re-parent
        if pids:
            log.warning(
                "qcluster: stopping now; killing %d processes (runs in flight are left to the "
                "reaper)",
                len(pids),
            )
        kill_all(pids)


class HostReaper(threading.Thread):
    """Report this host (`hosts.host_beat`) and `reaper.reap()` every BELVEDIR_REAP_SECONDS, in
    the cluster's main process. The cluster makes one pass (`once`) before it takes any task:
    a host coming back first removes the sandboxes of its runs that were failed while it was
    gone, which would otherwise run beside its new runs (over its capacity, on a GPU device
    handed out again) until the first timed pass."""

    def __init__(self, every: float):
        super().__init__(daemon=True, name="host-reaper")
        self.every = every
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.once()
        connection.close()

    def once(self) -> None:
        try:
            close_old_connections()
            hosts.host_beat()
            reaper.reap()
        except Exception:  # a failed pass (a dropped connection) must not end them all
            log.warning("the host reaper's pass failed; trying again", exc_info=True)
            connection.close()


class Command(qcluster.Command):
    help = qcluster.Command.help + " Stops cleanly on SIGTERM (see runs/management/commands)."

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018  (django-q2 signs tasks with it: fail early)
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        gpu_type = gpu.queue_gpu_type(os.environ.get("Q_CLUSTER_NAME", ""))
        if gpu_type:
            self.serve_gpu(gpu_type)
        host_reaper = None
        if os.environ.get("Q_CLUSTER_NAME", "") == settings.Q_HOUSEKEEPING_CLUSTER:
            scheduler()  # django-q2's own first pass comes 30 s after the start
        else:
            host_reaper = HostReaper(settings.BELVEDIR_REAP_SECONDS)
            host_reaper.once()  # before any task is taken
        connection.close()  # not shared with the processes the cluster forks
        cluster = StoppableCluster(grace=settings.Q_STOP_GRACE)
        cluster.start()
        if host_reaper is not None:
            host_reaper.start()
        if options.get("run_once", False):
            cluster.stop()
        while cluster.sentinel.is_alive():
            time.sleep(0.2)  # a stop signal runs its handler here
        if host_reaper is not None:
            host_reaper.stopped.set()
        signal.alarm(0)
        kill_all(descendants(cluster.pid))  # nothing of the cluster outlives it

    def serve_gpu(self, gpu_type: str) -> None:
        """A GPU type's cluster (gpu-a10g) runs only where BELVEDIR_GPU_TYPES has that type
        and GPU sandboxes can start (belvedir.gpu_host): it records this host's devices, which its runs then claim one each."""
        count = settings.BELVEDIR_GPU_TYPES.get(gpu_type)
        if not count:
            raise CommandError(
                f"Q_CLUSTER_NAME={gpu.queue_name(gpu_type)} serves {gpu_type} GPU runs, but "
                f"BELVEDIR_GPU_TYPES ({', '.join(settings.BELVEDIR_GPU_TYPES) or 'unset'}) "
                f"gives this host no {gpu_type}; set it like {gpu_type.lower()}:1"
            )
        check = gpu_host_check(refresh=True)  # what is missing refuses to serve, not runs
        if check.problems:
            raise CommandError(refusal(gpu_type, check.problems))
        devices = [d for d in gpu.devices_register() if d.gpu_type == gpu_type]
        simulated = (
            " (simulated: BELVEDIR_GPU_SIMULATE=1)" if settings.BELVEDIR_GPU_SIMULATE else ""
        )
        self.stdout.write(
            f"Serving {gpu_type} GPU runs on {gpu.worker_host()}, devices "
            f"{', '.join(d.device_id for d in devices)}{simulated}"
        )
