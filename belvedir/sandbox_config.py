"""Where Django settings meet the sandboxes: the one module that reads them.

`sandbox_config()` is the backend's `SandboxConfig`, `get_backend()` the configured backend
made with it, `spec_from_settings()` a `SandboxSpec` with the limits, image, network and
runtime the settings give, `instance_id()` tells this platform's sandboxes from another's on
a shared engine, `image_config()` says what `manage.py sandbox_image` builds.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from sandboxes import entrypoint, taskd
from sandboxes.base import SandboxBackend, SandboxSpec
from sandboxes.config import SandboxConfig, backend_for
from sandboxes.image_recipe import ImageConfig


def get_backend() -> SandboxBackend:
    """The configured backend (BELVEDIR_SANDBOX_BACKEND, default "docker"), made with
    `sandbox_config()`."""
    return backend_for(sandbox_config())


def sandbox_config() -> SandboxConfig:
    """What the backend is made with, from the settings.

    Docker: the engine of DOCKER_HOST (else the local socket), the host CA bundle of
    BELVEDIR_SANDBOX_CA_MOUNT mounted read-only when set, sandboxes labelled `instance_id()`,
    quota volumes under BELVEDIR_SANDBOX_DATA_DIR keeping BELVEDIR_MIN_FREE_DISK free,
    BELVEDIR_SANDBOX_SPARE_VOLUMES of them made ahead, BELVEDIR_SANDBOX_WARM sandboxes of the
    default shape (`warm_template()`) started ahead on this host's engine, the sandboxes of
    instances with no heartbeat on this host for BELVEDIR_INSTANCE_STALE s removed.
    """
    return SandboxConfig(
        backend=settings.BELVEDIR_SANDBOX_BACKEND,
        ca_bundle_mount=getattr(settings, "BELVEDIR_SANDBOX_CA_MOUNT", None) or None,
        instance=instance_id(),
        data_dir=Path(settings.BELVEDIR_SANDBOX_DATA_DIR),
        reserve_bytes=settings.BELVEDIR_MIN_FREE_DISK,
        spare_volumes=settings.BELVEDIR_SANDBOX_SPARE_VOLUMES,
        warm_size=settings.BELVEDIR_SANDBOX_WARM,
        warm_template=warm_template(),
        warm_engine=engine_name(),
        warm_max_age=settings.BELVEDIR_SANDBOX_WARM_MAX_AGE,
        instance_stale=settings.BELVEDIR_INSTANCE_STALE,
        install_cache_bytes=settings.BELVEDIR_INSTALL_CACHE_BYTES,
        task_exec_server=taskd.built(settings.BELVEDIR_TASK_EXEC_SERVER),
    )


DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


def worker_host() -> str:
    """This worker host's name: BELVEDIR_WORKER_HOST, else the host name."""
    return settings.BELVEDIR_WORKER_HOST or socket.gethostname()


def engine_name() -> str:
    """The worker host and the Docker engine its sandboxes run on, as a run records them:
    `host unix:///var/run/docker.sock` (DOCKER_HOST, else the local socket)."""
    return f"{worker_host()} {os.environ.get('DOCKER_HOST') or DEFAULT_DOCKER_HOST}"


def spec_from_settings(**fields: Any) -> SandboxSpec:
    """A SandboxSpec of `fields` (run_id, command, env, workspace, …), the rest from settings:
    BELVEDIR_SANDBOX_{IMAGE,NETWORK,CPUS,MEMORY,PIDS,RUNTIME,DISK}; the host's network
    instead of BELVEDIR_SANDBOX_NETWORK under BELVEDIR_SANDBOX_HOST_NETWORK=1 (development)."""
    defaults: dict[str, Any] = {
        "image": settings.BELVEDIR_SANDBOX_IMAGE,
        "network": "host"
        if settings.BELVEDIR_SANDBOX_HOST_NETWORK
        else settings.BELVEDIR_SANDBOX_NETWORK,
        "cpus": float(settings.BELVEDIR_SANDBOX_CPUS),
        "memory": str(settings.BELVEDIR_SANDBOX_MEMORY),
        "pids": int(settings.BELVEDIR_SANDBOX_PIDS),
        "runtime": settings.BELVEDIR_SANDBOX_RUNTIME,
        "disk_bytes": settings.BELVEDIR_SANDBOX_DISK or None,
    }
    return SandboxSpec(**{**defaults, **fields})


def warm_template() -> SandboxSpec:
    """The shape of the warm pool's sandboxes: a run sandbox as the executor asks for one
    (the entrypoint, the workspace, the settings' image and limits, no GPU)."""
    return spec_from_settings(
        run_id="", command=list(entrypoint.COMMAND), workdir=entrypoint.WORKSPACE
    )


def instance_id() -> str:
    """Which platform a sandbox belongs to: BELVEDIR_INSTANCE, else derived from the database.

    Two platforms (or a dev server and a test session) on one Docker engine have different
    databases, so neither reaps the other's live sandboxes.
    """
    if settings.BELVEDIR_INSTANCE:
        return settings.BELVEDIR_INSTANCE
    db = connection.settings_dict
    key = f"{db.get('ENGINE')}|{db.get('HOST')}|{db.get('PORT')}|{db.get('NAME')}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def image_config() -> ImageConfig:
    """What `manage.py sandbox_image` builds: BELVEDIR_SANDBOX_IMAGE, _CA_BUNDLE,
    _DEBIAN_MIRROR and BELVEDIR_CACHE_DIR (the defaults of ImageConfig when unset)."""
    defaults = ImageConfig()
    return ImageConfig(
        image=settings.BELVEDIR_SANDBOX_IMAGE or defaults.image,
        ca_bundle=Path(settings.BELVEDIR_SANDBOX_CA_BUNDLE or defaults.ca_bundle),
        cache_dir=Path(settings.BELVEDIR_CACHE_DIR or defaults.cache_dir),
        mirror=getattr(settings, "BELVEDIR_SANDBOX_DEBIAN_MIRROR", "") or defaults.mirror,
    )
