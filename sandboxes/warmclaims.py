"""A host's warm sandboxes on its disk (`sandboxes.warm`): what each member's maker recorded
(its `.ready` file) and who claimed it (its `.claim` file, made whole or not at all), in
`<data dir>/.warm/`, shared by every platform process on the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MAKING_GRACE_SECONDS = 120  # a member this young may still be waiting for its .ready file
SWEEP_CLAIM = "-"  # the owner a sweep claims a member as, so no launch takes it meanwhile
CLAIM_GRACE = 60  # an empty claim file this old was left by a process killed as it claimed


@dataclass(frozen=True)
class Member:
    """One warm sandbox as its maker recorded it on this host."""

    id: str
    name: str
    key: str
    image_id: str
    workdir: str  # its workdir's folder on this host
    volume: str
    created: float
    instance: str = ""  # the platform instance that made it (records before it had none)
    engine: str = ""  # the engine it runs on (LABEL_WARM_ENGINE)


class Claims:
    """The state files of a host's warm sandboxes, in `<data dir>/.warm/` (see
    `sandboxes.warm`): who claimed which member, what each member's maker recorded."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder

    def claim(self, container_id: str, owner: str) -> bool:
        """Claim a member for `owner`: its claim file appears whole or not at all (written
        aside, then linked into place, which fails if it exists), so a process killed half-way
        never leaves an empty claim that nothing would ever remove."""
        partial = self._path(container_id, f"claim.{os.getpid()}.{threading.get_ident()}")
        try:
            partial.write_text(owner)
            os.link(partial, self._path(container_id, "claim"))
        except FileExistsError:
            return False
        except FileNotFoundError:  # no pool folder: nothing to claim
            return False
        finally:
            partial.unlink(missing_ok=True)
        return True

    def _abandoned(self, container_id: str) -> bool:
        """An empty claim older than a claim takes: left by a process killed as it claimed."""
        path = self._path(container_id, "claim")
        try:
            return path.stat().st_size == 0 and time.time() - path.stat().st_mtime > CLAIM_GRACE
        except OSError:
            return False

    def claimed_by(self, container_id: str) -> str | None:
        try:
            return self._path(container_id, "claim").read_text()
        except OSError:
            return None

    def claim_age(self, container_id: str) -> float | None:
        """Seconds since the member was claimed; None if it is not."""
        try:
            return time.time() - self._path(container_id, "claim").stat().st_mtime
        except OSError:
            return None

    def records(self) -> list[Member]:
        """Every member recorded on this host: of any pool, engine and instance."""
        paths = self.dir.glob("*.ready") if self.dir.is_dir() else []
        return [member for path in paths if (member := member_at(path)) is not None]

    def forget(self, container_id: str) -> None:
        """Its state: the ready and claim files, and any a killed process left half-written."""
        for path in self.dir.glob(f"{container_id}.*"):
            with contextlib.suppress(OSError):
                path.unlink()

    def forget_removed(self, engine: str, present: set[str]) -> list[str]:
        """Forget the records of `engine`'s members whose container is not in `present` (the
        engine's warm containers, listed just before), past the time a member takes to be
        made; a record of no engine (made before records named theirs) only while no run
        holds it. The ids forgotten."""
        forgotten = []
        for member in self.records():
            if member.id in present or time.time() - member.created < MAKING_GRACE_SECONDS:
                continue
            if member.engine == engine or (
                not member.engine and self.claimed_by(member.id) is None
            ):
                self.forget(member.id)
                forgotten.append(member.id)
        return forgotten

    def _path(self, container_id: str, kind: str) -> Path:
        return self.dir / f"{container_id}.{kind}"


def member_at(path: Path) -> Member | None:
    """The member a `.ready` file records; None when it is gone or unreadable."""
    try:
        return Member(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
