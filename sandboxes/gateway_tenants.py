"""Whose is a connection to the sandbox gateway: the run and organization of a source address.

The gateway (sandboxes/gateway.py) counts connections per address, per run and per
organization, so one tenant's sandboxes cannot hold every connection it serves. It learns who
an address is from the Docker engine: the containers on the sandbox network, their address
there and their `belvedir.run_id` label (set by the backend on every container it starts for a
run, over any label the image carries; a warm pool member has none until a run claims it, and
then its claim file names the run). The organization comes from the run id (`organization_of`,
the platform's database in `manage.py sandbox_gateway`), never from a label a task image could
set. An address no container owns, or one whose run is unknown, is a tenant of its own.

What the engine says is cached; an unknown address refreshes it at most once per
`min_interval` seconds, and a known one after `max_age` seconds (an address Docker gives to a
new container is counted for the old owner until then: counting only, never access).
Pure asyncio and the docker SDK, no Django.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sandboxes.labels import LABEL_RUN_ID, LABEL_WARM
from sandboxes.warmclaims import SWEEP_CLAIM

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tenant:
    """Who holds a connection: `run` and `organization` are keys to count by (a run id and an
    organization id, or `ip:<address>` for an address nobody owns)."""

    address: str
    run: str
    organization: str


class Tenants(Protocol):
    async def of(self, address: str) -> Tenant:
        """Whose a connection from `address` is."""
        ...


def stranger(address: str) -> Tenant:
    """An address no sandbox owns: its own run and its own organization."""
    return Tenant(address=address, run=f"ip:{address}", organization=f"ip:{address}")


class MappedTenants:
    """A fixed `address -> (run, organization)` mapping (tests; a gateway without an engine
    maps nothing: every address is its own tenant)."""

    def __init__(self, mapping: Mapping[str, tuple[str, str]] | None = None) -> None:
        self.mapping = dict(mapping or {})

    async def of(self, address: str) -> Tenant:
        if address not in self.mapping:
            return stranger(address)
        run, organization = self.mapping[address]
        return Tenant(address=address, run=run, organization=organization)


class DockerTenants:
    """Tenants of the sandbox network's containers, from the Docker engine (see the module)."""

    def __init__(
        self,
        client: Callable[[], object],
        *,
        network: str,
        organization_of: Callable[[list[str]], Mapping[str, str]],
        warm_dir: Path | None = None,
        min_interval: float = 1.0,
        max_age: float = 10.0,
        wait: float = 2.0,
    ) -> None:
        """`client`: returns a docker.DockerClient. `organization_of(run ids)`: each known run's
        organization id (runs it does not know are left out). `warm_dir`: the warm pool's
        folder of claim files. A connection waits at most `wait` seconds for a refresh."""
        self._client = client
        self.network = network
        self.organization_of = organization_of
        self.warm_dir = warm_dir
        self.min_interval, self.max_age, self.wait = min_interval, max_age, wait
        self._known: dict[str, Tenant] = {}
        self._organizations: dict[str, str] = {}  # of the runs listed (a run's never changes)
        self._started = float("-inf")  # when the last refresh began
        self._finished = float("-inf")  # when the last refresh to end had begun
        self._refreshing: asyncio.Task | None = None
        # One thread: the refresh's database connection stays on it.
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tenants")

    async def of(self, address: str) -> Tenant:
        """Whose `address` is. An address not yet known waits for a listing begun after its
        connection arrived (a container's address is listed before its first process runs),
        so a sandbox just started is never a stranger."""
        arrived = time.monotonic()
        if address not in self._known:
            await self._listed_since(arrived)
        elif arrived - self._finished >= self.max_age:
            await self._listed_since(arrived - self.max_age)
        return self._known.get(address) or stranger(address)

    async def _listed_since(self, since: float) -> None:
        """Until a listing begun at or after `since` has ended, at most `wait` seconds."""
        deadline = time.monotonic() + self.wait
        while self._finished < since:
            now = time.monotonic()
            if now >= deadline:
                log.warning("sandbox gateway: the engine did not list the sandboxes in time")
                return
            if self._refreshing is None or self._refreshing.done():
                pause = self._started + self.min_interval - now
                if pause > 0:  # at most one listing a `min_interval`
                    await asyncio.sleep(min(pause, deadline - now))
                    continue
                self._refreshing = asyncio.ensure_future(self._refresh())
            # shielded: one listing serves every connection waiting for it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._refreshing), deadline - now)

    async def _refresh(self) -> None:
        self._started = started = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
            self._known = await loop.run_in_executor(self._thread, self._read)
        except Exception as exc:  # the engine or the database is down: count by address
            log.warning("sandbox gateway: cannot tell whose the sandboxes are: %s", exc)
        finally:
            self._finished = max(self._finished, started)

    def _read(self) -> dict[str, Tenant]:
        containers = self._client().api.containers(filters={"network": [self.network]})
        owners: dict[str, str] = {}  # address -> run id
        for item in containers:
            network = ((item.get("NetworkSettings") or {}).get("Networks") or {}).get(self.network)
            address = (network or {}).get("IPAddress")
            run_id = self._run_of(item)
            if address and run_id:
                owners[address] = run_id
        self._learn(set(owners.values()))
        return {
            address: Tenant(
                address=address, run=run_id, organization=self._organizations.get(run_id, run_id)
            )
            for address, run_id in owners.items()
        }

    def _run_of(self, item: Mapping) -> str:
        """The run id the backend labelled the container with (over any the image set); for a
        warm pool member (no run id label), the run its claim file names."""
        labels = item.get("Labels") or {}
        if labels.get(LABEL_RUN_ID):
            return labels[LABEL_RUN_ID]
        if LABEL_WARM not in labels or self.warm_dir is None:
            return ""
        try:
            owner = (self.warm_dir / f"{item['Id']}.claim").read_text().strip()
        except OSError:
            return ""
        return "" if owner == SWEEP_CLAIM else owner

    def _learn(self, run_ids: Iterable[str]) -> None:
        """Each run's organization, once; while the database cannot say, each run counts as
        an organization of its own (and is asked about again at the next listing)."""
        run_ids = set(run_ids)
        self._organizations = {r: o for r, o in self._organizations.items() if r in run_ids}
        missing = sorted(run_ids - set(self._organizations))
        if not missing:
            return
        try:
            self._organizations.update(self.organization_of(missing))
        except Exception as exc:
            log.warning("sandbox gateway: cannot read the runs' organizations: %s", exc)
