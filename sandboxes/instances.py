"""Which platform instances are alive on a worker host: a heartbeat file per instance.

Several platforms (a `make up` on a fresh database, a test session) may share one host's engine
and sandbox data dir; each labels its sandboxes with its instance (`belvedir.instance`) and
reaps only its own. A platform that is gone (stopped, its database reset) would leave its
warm sandboxes and their quota volumes, promised in full, on the host for ever. A container's
labels cannot change after it is made, so an instance's liveness lives beside them:
`<data dir>/.instances/<key>` holds the instance's id, and its modification time is the
instance's last beat on this host (`beat`: every reaper pass, every warm fill, every launch,
so at least every BELVEDIR_REAP_SECONDS while a cluster of it runs here). An instance whose
beat is older than the stale period (BELVEDIR_INSTANCE_STALE) is `gone`: any other instance's
reaper on the host removes its sandboxes and releases their volumes. One that never beat (it
ran before heartbeats existed) is judged by the age of what it left (`sweep_gone`).

Only sandboxes whose mounts lie under this data dir are judged: their instance beats here.
The refusal of a sandbox for want of disk names who holds the promises (`holders`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import docker

from sandboxes import volumes, warm
from sandboxes.base import LABEL_INSTANCE, LABEL_RUN_ID, SandboxError

DIR = ".instances"
log = logging.getLogger(__name__)


def heartbeat_file(data_dir: Path, instance: str) -> Path:
    """`instance`'s heartbeat file on the host whose sandbox data dir is `data_dir`."""
    return data_dir / DIR / hashlib.sha256(instance.encode()).hexdigest()[:24]


def beat(data_dir: Path, instance: str | None) -> None:
    """Record that `instance` is alive on this host now. Never raises: a missed beat is
    made good by the next one, well within the stale period."""
    if not instance:
        return
    path = heartbeat_file(data_dir, instance)
    with contextlib.suppress(OSError):
        try:
            os.utime(path)
            return
        except FileNotFoundError:
            pass
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(instance)
        os.replace(partial, path)


def last_beat(data_dir: Path, instance: str) -> float | None:
    """When `instance` last beat on this host (epoch seconds); None if it never did."""
    try:
        return heartbeat_file(data_dir, instance).stat().st_mtime
    except OSError:
        return None


def gone(data_dir: Path, instance: str, *, stale: float, made: float) -> bool:
    """Whether `instance` is gone from this host, for something of it made at `made` (epoch
    seconds): its last beat is older than `stale` seconds, or it never beat and that thing is
    older than `stale`."""
    last = last_beat(data_dir, instance)
    return time.time() - (made if last is None else last) > stale


def idle_for(data_dir: Path, instance: str) -> float | None:
    """Seconds since `instance` last beat on this host; None if it never did."""
    last = last_beat(data_dir, instance)
    return None if last is None else time.time() - last


def sweep_gone(
    client: docker.DockerClient,
    *,
    data_dir: Path,
    instance: str,
    engine: str,
    stale: float,
    remove: Callable[[str, str], None],
) -> list[str]:
    """Beat for `instance`, then remove (`remove(container id, run id)`, which releases its
    quota volume) every sandbox on this engine of another instance gone from this host:
    its warm sandboxes, taken or not, and its runs' sandboxes; and forget the warm records
    of this engine's members whose container is gone. The ids removed.

    A warm sandbox is claimed first (as the pool's own sweep does), so no run of a platform
    coming back takes it as it goes; one a run claimed less than `stale` s ago is left (its
    platform is not gone after all). Never touches a sandbox whose instance beat within
    `stale` s, nor one whose mounts are not in `data_dir` (another host's instance)."""
    beat(data_dir, instance)
    claims = warm.Claims(data_dir / warm.POOL_DIR)
    removed: list[str] = []
    for item in client.api.containers(all=True, filters={"label": [LABEL_INSTANCE]}):
        labels = item.get("Labels") or {}
        owner = labels.get(LABEL_INSTANCE, "")
        if not owner or owner == instance or not _under(data_dir, item):
            continue
        if not gone(data_dir, owner, stale=stale, made=float(item.get("Created") or 0)):
            continue
        container_id = item["Id"]
        if warm.LABEL_WARM in labels:
            age = claims.claim_age(container_id)
            if age is None and not claims.claim(container_id, warm.SWEEP_CLAIM):
                continue
            if (
                age is not None
                and age < stale
                and claims.claimed_by(container_id) != warm.SWEEP_CLAIM
            ):
                continue
        try:
            remove(container_id, labels.get(LABEL_RUN_ID, ""))
        except SandboxError as exc:  # the next pass tries again: its claim stays
            log.warning("could not remove the sandbox %s of a gone instance: %s", container_id, exc)
            continue
        claims.forget(container_id)
        removed.append(container_id)
        log.info(
            "removed the sandbox %s of instance %s, gone from this host (%s)",
            container_id[:12],
            owner,
            _seen(data_dir, owner),
        )
    present = client.api.containers(
        all=True, filters={"label": [f"{warm.LABEL_WARM_ENGINE}={engine}"]}
    )
    claims.forget_removed(engine, {item["Id"] for item in present})
    return removed


def holders(client: docker.DockerClient, *, data_dir: Path, instance: str | None) -> dict[str, str]:
    """Who holds each quota volume a container on this engine uses, by volume name: "this
    platform's runs", "this platform's warm sandboxes" or "instance X's sandboxes (…)"."""
    claims = warm.Claims(data_dir / warm.POOL_DIR)
    held = {}
    for item in client.api.containers(all=True, filters={"label": volumes.LABEL_VOLUME}):
        labels = item.get("Labels") or {}
        owner = labels.get(LABEL_INSTANCE, "")
        if owner and owner != instance:
            who = f"instance {owner}'s sandboxes ({_seen(data_dir, owner)})"
        elif warm.LABEL_WARM in labels and claims.claimed_by(item["Id"]) is None:
            who = "this platform's warm sandboxes"
        else:
            who = "this platform's runs"
        held[labels.get(volumes.LABEL_VOLUME, "")] = who
    return held


def _seen(data_dir: Path, instance: str) -> str:
    idle = idle_for(data_dir, instance)
    return "never seen alive here" if idle is None else f"last seen alive here {idle:.0f} s ago"


def _under(data_dir: Path, item: dict) -> bool:
    root = f"{str(data_dir).rstrip('/')}/"
    return any(str(mount.get("Source", "")).startswith(root) for mount in item.get("Mounts") or [])
