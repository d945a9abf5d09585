"""The install cache's side on the platform: which snapshot a run may start from, the record of
the one a run left, clearing a harness's, and each host's sweep (sandboxes.installcache keeps
the files; docs/operating.md#the-install-cache).

A run's key is the organization, the harness, the resolved commit, the install command and
the harness env, every value hashed (a secret's value changes the key and never appears in
it); the backend folds in the sandbox image's id and the compute shape. A snapshot is found
only on the worker host that made it, under the run's own organization, and only while its
row (`InstallSnapshot`) exists. `BELVEDIR_INSTALL_CACHE=off` in a harness's env turns it off
for that harness; BELVEDIR_INSTALL_CACHE_BYTES=0 for the platform.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from belvedir.sandbox_config import engine_name
from belvedir.text import ago_text
from harnesses import env_secrets
from harnesses.models import InstallSnapshot
from sandboxes import installcache
from sandboxes.base import SandboxBackend, SandboxError, SandboxHandle, SandboxSpec
from sandboxes.entrypoint import SNAPSHOT_FILE, stage_marker
from sandboxes.installcache import InstallCache, Snapshot

OFF_VARIABLE = "BELVEDIR_INSTALL_CACHE"


def enabled(env: dict[str, str], install_command: str) -> bool:
    """Whether runs of a harness with this env and install command use the cache."""
    if settings.BELVEDIR_INSTALL_CACHE_BYTES <= 0 or not settings.BELVEDIR_SANDBOX_DISK:
        return False
    if install_command.strip() in ("", "true", ":"):
        return False  # nothing to skip
    return env.get(OFF_VARIABLE, "").strip().lower() not in ("off", "0", "false", "no")


def base_key(
    *, organization_id: str, harness_id: str, commit: str, install_command: str, env: dict
) -> str:
    """The platform's half of a snapshot's key; the env's values are hashed one by one."""
    hashed = {name: hashlib.sha256(str(value).encode()).hexdigest() for name, value in env.items()}
    parts = [organization_id, harness_id, commit, install_command, sorted(hashed.items())]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@dataclass
class Plan:
    """A run's way through the cache: `cache` for its spec (None: no cache), the row of the
    snapshot it starts from (`reused`), and the note saying so."""

    cache: InstallCache | None = None
    reused: InstallSnapshot | None = None
    host: str = ""
    harness_id: str = ""

    @property
    def note(self) -> str:
        if self.reused is None:
            return ""
        when = ago_text(self.reused.created_at, now=timezone.now())
        return f"belvedir: install reused from {self.reused.run_id}, {when} (install cache)."

    @property
    def notes(self) -> list[str]:
        """The run's notes (the run page) for it."""
        return [self.note] if self.note else []

    def spec(self, spec: SandboxSpec, workspace: bytes) -> SandboxSpec:
        return dataclasses.replace(spec, install_cache=self.cache, workspace=workspace)

    def record(self, backend: SandboxBackend, handle: SandboxHandle | None, run_id: str):
        """After the sandbox ended: the row of the snapshot its install left, if it did."""
        if self.cache is None or self.reused is not None or handle is None:
            return None
        try:
            saved = backend.saved_install(handle)
        except SandboxError:
            saved = None
        if saved is None:
            return None
        now = timezone.now()
        row, _ = InstallSnapshot.objects.update_or_create(
            host=self.host,
            organization_id=self.cache.organization,
            key=saved.key,
            defaults={"harness_id": self.harness_id, "run_id": run_id, "size_bytes": saved.bytes,
                      "reused": 0, "created_at": now, "used_at": now},
        )  # fmt: skip
        return row

    def workspace(self, workdir: Path) -> tuple[Path, str]:
        """What to copy in: the control files alone when the snapshot has the repo."""
        return (workdir / ".belvedir", ".belvedir") if self.reused else (workdir, ".")


def plan(
    run, commit: str, spec: SandboxSpec, backend: SandboxBackend, stage_key: str, control: Path
) -> Plan:
    """The plan of `run` (a runs.Run, at `commit`, in a sandbox of `spec`): start from a
    snapshot when this host has one of its key, else take one after its install (the snapshot
    file in `control` asks the entrypoint to wait for it, signed with `stage_key`)."""
    snap = run.harness_snapshot or {}
    install = snap.get("install_command") or ""
    env = env_secrets.env_plain(snap.get("env") or {}, run.harness_env_secrets_encrypted)
    host = engine_name()
    if not run.harness_id or not commit or not enabled(env, install):
        return Plan()
    organization_id = run.project.organization_id
    key = base_key(
        organization_id=organization_id,
        harness_id=run.harness_id,
        commit=commit,
        install_command=install,
        env=env,
    )
    cache = InstallCache(organization=organization_id, key=key)
    try:
        found = backend.find_install(dataclasses.replace(spec, install_cache=cache))
    except SandboxError:
        found = None
    row = _row(found, host=host, organization_id=organization_id, harness_id=run.harness_id)
    if row is not None:
        # Used from now (LRU): another save's eviction between here and the launch takes
        # the least recently used first, not the snapshot this run is to start from.
        installcache.touch(found)
        return Plan(dataclasses.replace(cache, restore=True), row, host, run.harness_id)
    (control / SNAPSHOT_FILE.rsplit("/", 1)[1]).write_text("")
    marked = dataclasses.replace(cache, marker=stage_marker(stage_key, "installed"))
    return Plan(marked, None, host, run.harness_id)


def _row(
    found: Snapshot | None, *, host: str, organization_id: str, harness_id: str
) -> InstallSnapshot | None:
    if found is None:
        return None
    rows = InstallSnapshot.objects.filter(
        host=host, organization_id=organization_id, harness_id=harness_id, key=found.key
    )
    if not rows.update(reused=F("reused") + 1, used_at=timezone.now()):
        return None
    return rows.first()


def clear(*, harness) -> int:
    """Forget every snapshot of the harness's install, on every host (each host's reaper then
    deletes the files); how many there were."""
    deleted, _ = InstallSnapshot.objects.filter(harness=harness).delete()
    return deleted


def sweep(*, backend: SandboxBackend, host: str, running: set[str]) -> list[Snapshot]:
    """This host's pass: delete the snapshots no row names (but those of `running` runs,
    recorded as they end), then what is over the budget (and the rows of those deleted)."""
    rows = set(InstallSnapshot.objects.filter(host=host).values_list("organization_id", "key"))
    removed = backend.sweep_install_cache(
        lambda s: (s.organization, s.key) in rows or s.run_id in running
    )
    for snapshot in removed:
        InstallSnapshot.objects.filter(
            host=host, organization_id=snapshot.organization, key=snapshot.key
        ).delete()
    return removed
