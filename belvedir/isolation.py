"""Is sandbox isolation in place? Checked before launches, at start-up and on the admin.

Launches are refused (Unavailable, a 503, "sandbox isolation is not in place: …") while:
- the isolated network or its firewall rules are missing (`sandboxes.network`), unless
  BELVEDIR_SANDBOX_HOST_NETWORK=1 (single-tenant development: a warning instead);
- the Docker engine does not answer, or lacks the configured runtime (BELVEDIR_SANDBOX_RUNTIME);
- the worker's disk has less than BELVEDIR_MIN_FREE_DISK free.
Running under runc instead of gVisor, or on host networking, is a warning, not a refusal.

A process that cannot read the firewall (not root) trusts the status the workers write to
`<BELVEDIR_SANDBOX_DATA_DIR>/../isolation-status.json` while it is fresh. Results are cached
for CACHE_SECONDS per process; a check takes 0.05-0.25 s (the firewall rules, the engine), so
after that a status that was fine is still answered for up to STALE_SECONDS while a new check
runs behind it, rather than holding up a launch or a run's start. A status with problems, or
one older than that, is checked again at once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings

from belvedir.errors import Unavailable
from belvedir.sandbox_config import get_backend
from sandboxes import diskquota
from sandboxes.base import SandboxError
from sandboxes.network import NetworkConfig, NetworkSetupError, problems

log = logging.getLogger(__name__)
CACHE_SECONDS = 15.0
STALE_SECONDS = 30.0
STATUS_FRESH_SECONDS = 300.0
RUNC_WARNING = (
    "sandboxes run under runc, not gVisor (BELVEDIR_SANDBOX_RUNTIME=runc): a kernel exploit in "
    "a harness reaches the host's kernel"
)
HOST_NETWORK_WARNING = (
    "sandboxes share the host's network (BELVEDIR_SANDBOX_HOST_NETWORK=1): every harness can "
    "reach every service on this machine; for single-tenant development only"
)


@dataclass(frozen=True)
class IsolationStatus:
    problems: list[str] = field(default_factory=list)  # any of these refuses launches
    warnings: list[str] = field(default_factory=list)
    checked_at: float = 0.0  # time.time()

    @property
    def ok(self) -> bool:
        return not self.problems


_lock = threading.Lock()
_cached: tuple[float, tuple, IsolationStatus] | None = None
_refreshing = False  # a check behind a stale answer is under way
_SETTINGS = (
    "BELVEDIR_SANDBOX_HOST_NETWORK",
    "BELVEDIR_SANDBOX_NETWORK",
    "BELVEDIR_SANDBOX_SUBNET",
    "BELVEDIR_SANDBOX_GATEWAY",
    "BELVEDIR_SANDBOX_BRIDGE",
    "BELVEDIR_SANDBOX_PORTS",
    "BELVEDIR_SANDBOX_ALLOW_CIDRS",
    "BELVEDIR_SANDBOX_EGRESS",
    "BELVEDIR_SANDBOX_RUNTIME",
    "BELVEDIR_SANDBOX_DATA_DIR",
    "BELVEDIR_MIN_FREE_DISK",
)


def network_config() -> NetworkConfig:
    return NetworkConfig(
        name=settings.BELVEDIR_SANDBOX_NETWORK,
        subnet=settings.BELVEDIR_SANDBOX_SUBNET,
        gateway=settings.BELVEDIR_SANDBOX_GATEWAY,
        bridge=settings.BELVEDIR_SANDBOX_BRIDGE,
        ports=settings.BELVEDIR_SANDBOX_PORTS,
        allow_cidrs=tuple(settings.BELVEDIR_SANDBOX_ALLOW_CIDRS),
        egress=settings.BELVEDIR_SANDBOX_EGRESS,
    )


def status_file() -> Path:
    return Path(settings.BELVEDIR_SANDBOX_DATA_DIR).parent / "isolation-status.json"


def _engine_problems(runtime: str) -> list[str]:
    try:
        runtimes = get_backend().runtimes()
    except SandboxError as exc:
        return [f"the Docker engine does not answer ({str(exc)[:200]})"]
    if runtime not in runtimes:
        return [
            f"the Docker engine has no {runtime!r} runtime (BELVEDIR_SANDBOX_RUNTIME); "
            "run scripts/ensure-docker.sh, which installs gVisor and registers it"
        ]
    return []


def _disk_problems() -> list[str]:
    data_dir = Path(settings.BELVEDIR_SANDBOX_DATA_DIR)
    free = diskquota.free_disk_bytes(data_dir)
    if free < settings.BELVEDIR_MIN_FREE_DISK:
        return [
            f"the worker's disk has {free / 2**30:.1f} GiB free, below the "
            f"{settings.BELVEDIR_MIN_FREE_DISK / 2**30:.1f} GiB of BELVEDIR_MIN_FREE_DISK"
        ]
    return []


def _firewall_problems() -> list[str]:
    try:
        return problems(network_config().validated())
    except NetworkSetupError as exc:
        return [str(exc)]


def _check() -> IsolationStatus:
    found: list[str] = []
    warnings: list[str] = []
    if settings.BELVEDIR_SANDBOX_HOST_NETWORK:
        warnings.append(HOST_NETWORK_WARNING)
    else:
        found += _firewall_problems()
    runtime = settings.BELVEDIR_SANDBOX_RUNTIME or "runc"  # "": the engine's default, runc
    if runtime == "runc":
        warnings.append(RUNC_WARNING)
    found += _engine_problems(runtime)
    found += _disk_problems()
    return IsolationStatus(problems=found, warnings=warnings, checked_at=time.time())


def _write_status(status: IsolationStatus) -> None:
    path = status_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(status)))
        tmp.chmod(0o644)
        tmp.replace(path)
    except OSError as exc:
        log.warning("could not write the sandbox isolation status to %s: %s", path, exc)


def _read_status() -> IsolationStatus:
    path = status_file()
    try:
        status = IsolationStatus(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        status = None
    if status is None or time.time() - status.checked_at > STATUS_FRESH_SECONDS:
        return IsolationStatus(
            problems=[
                f"this process (uid {os.geteuid()}) cannot read the firewall, and no worker "
                f"recorded a check in {path} in the last {STATUS_FRESH_SECONDS:.0f} s"
            ],
            checked_at=time.time(),
        )
    return status


def isolation_status(*, refresh: bool = False) -> IsolationStatus:
    """The current status (cached for CACHE_SECONDS, a fine one answered up to STALE_SECONDS
    while it is checked again behind the answer); problems and warnings are logged."""
    global _refreshing
    key = tuple(getattr(settings, name) for name in _SETTINGS)
    with _lock:
        if _cached is not None and not refresh:
            at, cached_key, cached = _cached
            age = time.monotonic() - at
            if cached_key == key and age < CACHE_SECONDS:
                return cached
            if cached_key == key and age < STALE_SECONDS and cached.ok:
                if not _refreshing:
                    _refreshing = True
                    threading.Thread(
                        target=_check_behind, args=(key,), daemon=True, name="isolation check"
                    ).start()
                return cached
        status = _store(key, _current())  # under the lock: one check at a time
    return status


def _check_behind(key: tuple) -> None:
    global _refreshing
    try:
        status = _current()
        with _lock:
            _store(key, status)
    except Exception:  # the next call checks again, in the foreground if need be
        log.exception("the sandbox isolation check failed")
    finally:
        with _lock:
            _refreshing = False


def _current() -> IsolationStatus:
    if os.geteuid() == 0:
        status = _check()
        _write_status(status)
        return status
    return _read_status()


def _store(key: tuple, status: IsolationStatus) -> IsolationStatus:
    """Cache `status` (the caller holds the lock) and log what changed since the last one."""
    global _cached
    previous = _cached[2] if _cached else None
    _cached = (time.monotonic(), key, status)
    if previous is None or (previous.problems, previous.warnings) != (
        status.problems,
        status.warnings,
    ):
        for problem in status.problems:
            log.error("sandbox isolation is not in place: %s; launches are refused", problem)
        for warning in status.warnings:
            log.warning("sandbox isolation: %s", warning)
    return status


def isolation_require() -> None:
    """Raise Unavailable (a 503) while sandboxes could not be isolated."""
    status = isolation_status()
    if not status.ok:
        raise Unavailable(
            f"sandbox isolation is not in place: {'; '.join(status.problems)}. "
            "Runs cannot start until an operator fixes it."
        )
