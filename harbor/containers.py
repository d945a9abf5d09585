"""The platform's policy for a Harbor task container (the engine part, how an image is built
and a container run, is sandboxes/tasks.py): which engine a run's task sandboxes live on, what
a task image's build may name, pull and write, how its container is started, and how much a
task sandbox may write."""

from __future__ import annotations

import logging

from django.conf import settings

from belvedir.errors import Conflict
from belvedir.sandbox_config import engine_name, get_backend, spec_from_settings
from runs.models import Run
from sandboxes import taskpolicy
from sandboxes import tasks as docker_tasks
from sandboxes.base import LABEL_TASK_SANDBOX, SandboxError, SandboxHandle, SandboxSpec


def on_this_engine(run: Run) -> bool:
    """Whether this process talks to the run's engine: its worker host and DOCKER_HOST."""
    return bool(run.engine) and run.engine == engine_name()


def require_this_engine(run: Run) -> None:
    """Refuse (409 `wrong_host`) unless this process is on the run's engine: a task sandbox
    started here would sit on another host than its run, outside the run's sandbox network."""
    if on_this_engine(run):
        return
    host, _, engine = run.engine.partition(" ")
    here_host, _, here_engine = engine_name().partition(" ")
    where = f"worker host {host} (engine {engine})" if run.engine else "no worker host yet"
    raise Conflict(
        f"This run's sandbox is on {where}, but this platform process is on {here_host} "
        f"(engine {here_engine}). A run's task sandboxes run on its own engine and are served "
        f"only by a platform process on {host or 'that host'}: its sandbox gateway forwards the "
        "task-sandbox paths there (BELVEDIR_SANDBOX_GATEWAY_TASK_UPSTREAM, docs/scaling.md).",
        code="wrong_host",
    )


def limit_bytes() -> int:
    """What a task sandbox may write (BELVEDIR_TASK_SANDBOX_DISK; 0: the run sandboxes'
    BELVEDIR_SANDBOX_DISK)."""
    return settings.BELVEDIR_TASK_SANDBOX_DISK or settings.BELVEDIR_SANDBOX_DISK


def build_policy(organization: str) -> taskpolicy.Policy:
    """What an organization's task-image build may name, pull and write: the operator's
    base images, and what a task sandbox may write (`limit_bytes`)."""
    return taskpolicy.Policy(
        bases=tuple(settings.BELVEDIR_TASK_BASE_IMAGES),
        pull=settings.BELVEDIR_TASK_BASE_PULL,
        organization=organization,
        disk=limit_bytes(),
    )


def container_spec(*, run: Run, sandbox_id: str, image: str) -> SandboxSpec:
    """A task sandbox's container: the run's sandbox settings (its network, limits, runtime,
    labelled with the run's id) and the task image's own way of running."""
    return spec_from_settings(
        run_id=run.pk,
        image=image,
        command=["sleep", "infinity"],
        disk_bytes=None,  # Harbor task images write anywhere: a writable root, no quota volume
        user="",  # the image's user: Harbor task images expect root
        cap_add=docker_tasks.TASK_CAPABILITIES,
        labels={LABEL_TASK_SANDBOX: sandbox_id},
        exec_server=True,  # its commands without a `runsc exec` each (sandboxes/taskd.py)
    )


log = logging.getLogger(__name__)


def remove(handle: SandboxHandle) -> None:
    """Kill and remove a task sandbox's container; an engine that does not answer is logged
    (the reaper's next pass removes what is left)."""
    backend = get_backend()
    try:
        backend.kill(handle)
        backend.remove(handle)
    except SandboxError as exc:
        log.warning("could not remove task sandbox container %s: %s", handle.id, exc)
