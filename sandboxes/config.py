"""What a sandbox backend is configured with: one `SandboxConfig`, and the backend it names.

Pure on purpose: `belvedir.sandbox_config` reads Django's settings into a `SandboxConfig`; this
package never reads them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from sandboxes.base import SandboxBackend, SandboxError, SandboxSpec


@dataclass(frozen=True)
class SandboxConfig:
    """Everything a backend is made with (each sandbox's own limits are in its `SandboxSpec`).

    `backend`: which one ("docker"). `ca_bundle_mount`: a host CA bundle mounted read-only
    over the image's one. `instance`: labels this platform's sandboxes, so several platforms
    sharing one engine only list and reap their own. `data_dir`: where quota volumes live
    (needed for `SandboxSpec.disk_bytes`), refused unless the disk keeps `reserve_bytes` free
    with every volume full; `spare_volumes` made ahead. `warm_size` sandboxes of
    `warm_template`'s shape started ahead on the engine named `warm_engine`, each removed
    unused after `warm_max_age` s. `instance_stale`: how long another instance may go without
    a heartbeat on this host before its sandboxes here are removed. `install_cache_bytes`:
    the install cache's budget on each host (0: none; `sandboxes.installcache`).
    `task_exec_server`: the static exec server binary task sandboxes start with
    (`sandboxes.taskd`; None: their commands go by `docker exec`).
    """

    backend: str = "docker"
    ca_bundle_mount: str | None = None
    instance: str | None = None
    data_dir: Path | None = None
    reserve_bytes: int = 0
    spare_volumes: int = 0
    warm_size: int = 0
    warm_template: SandboxSpec | None = None
    warm_engine: str = ""
    warm_max_age: float = 3600.0
    instance_stale: float = 600.0
    install_cache_bytes: int = 0
    task_exec_server: Path | None = None


# The backends that ship with the package, by the name BELVEDIR_SANDBOX_BACKEND gives them:
# named by path, so this module (which every backend imports) imports none of them.
BUILTIN_BACKENDS = {"docker": "sandboxes.docker:DockerBackend"}


def backend_for(config: SandboxConfig) -> SandboxBackend:
    """The backend `config` names: "docker", or `package.module:Class` for a backend of one's
    own (made by its `from_config(config)`); SandboxError for any other name."""
    path = BUILTIN_BACKENDS.get(config.backend, config.backend)
    module, colon, name = path.partition(":")
    if colon and module and name:
        try:
            backend = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise SandboxError(f"no sandbox backend {config.backend!r}: {exc}") from exc
        return backend.from_config(config)
    raise SandboxError(f"unknown sandbox backend {config.backend!r} (BELVEDIR_SANDBOX_BACKEND)")
