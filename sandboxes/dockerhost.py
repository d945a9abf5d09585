"""What the Docker backend keeps on its host besides the sandboxes runs ask for: the warm pool's
sandboxes (taken by a run, made ahead), spare quota volumes and the sweep of unused ones, this
instance's heartbeat and the removal of gone instances' sandboxes, the resolv.conf sandboxes
get on the sandbox network, the engine's runtimes (the isolation check) and whose an address
on that network is (the gateway's tenants). Mixed into `DockerBackend`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import docker
import docker.errors
import requests

from sandboxes import instances, network, volumes, warm
from sandboxes.base import SandboxError, SandboxHandle, SandboxSpec
from sandboxes.engine import container_name, docker_errors
from sandboxes.gateway_tenants import DockerTenants

log = logging.getLogger("sandboxes.docker")  # the backend's one log, as before the split
PROBE_TIMEOUT = 10  # the isolation check's question to the engine (its runtimes)


class DockerHost:
    """Mixed into `DockerBackend`: it gives the client, the pool, the data dir and the
    lifecycle's own steps (`_allocate`, `_create`, `_attach`, `_put_workspace`, `_remove`)."""

    client: docker.DockerClient
    pool: warm.WarmPool | None
    data_dir: Path | None

    def runtimes(self) -> set[str]:
        """The engine's OCI runtimes, asked within PROBE_TIMEOUT s on a client of its own
        (the backend's `client` when it was given one); SandboxError in the SDK's words."""
        return set(self._runtimes_info())

    def runtime_command(self, name: str) -> list[str] | None:
        info = self._runtimes_info().get(name)
        if info is None:
            return None
        return [str(info.get("path") or name), *(info.get("runtimeArgs") or [])]

    def _runtimes_info(self) -> dict[str, dict]:
        try:
            client = self._client or docker.from_env(timeout=PROBE_TIMEOUT)
            try:
                return dict(client.info().get("Runtimes") or {})
            finally:
                if client is not self._client:
                    client.close()
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(str(exc)) from exc

    def tenants(
        self, *, network: str, organization_of: Callable[[list[str]], Mapping[str, str]]
    ) -> DockerTenants:
        """The sandbox gateway's tenants: `network`'s containers on this engine, by the run
        each is labelled with (a warm sandbox: the run its claim file names)."""
        return DockerTenants(
            lambda: self.client,
            network=network,
            organization_of=organization_of,
            warm_dir=self.data_dir / warm.POOL_DIR if self.data_dir is not None else None,
        )

    def _allocate(self, spec: SandboxSpec, name: str) -> tuple[str, dict[str, dict[str, str]]]:
        """A quota volume named after `name` ("" without a quota), and its mounts."""
        if not spec.disk_bytes:
            return "", {}
        if self.data_dir is None:
            raise SandboxError("a disk quota needs the backend's data_dir")
        self._spare_layout = {
            "image": spec.image,
            "workdir": spec.workdir,
            "size_bytes": spec.disk_bytes,
        }
        source = self._install_source(spec)  # an install snapshot to start from, if any
        began = time.monotonic()
        made, mounts = volumes.allocate(
            self.client,
            **self._spare_layout,
            data_dir=self.data_dir,
            name=volumes.volume_name(name),
            reserve_bytes=self.reserve_bytes,
            spare=self.spare_volumes > 0,
            holders=self._holders,
            source=source,
        )
        if source is not None:
            copied = (time.monotonic() - began) * 1000
            log.info("run %s starts from an install snapshot (%.0f ms)", spec.run_id, copied)
            try:
                self._drop_restored(spec, mounts)
            except OSError as exc:
                volumes.release(self.data_dir, made.name)
                raise SandboxError(f"could not prepare the restored install: {exc}") from exc
        return made.name, mounts

    def _holders(self) -> dict[str, str]:
        """Who uses which quota volume (`instances.holders`); nothing when the engine cannot say."""
        assert self.data_dir is not None
        try:
            return instances.holders(self.client, data_dir=self.data_dir, instance=self.instance)
        except (docker.errors.DockerException, requests.RequestException):
            return {}

    def _launch_warm(self, spec: SandboxSpec) -> SandboxHandle | None:
        """Hand the run to a warm sandbox: its workspace into the sandbox's workdir folder, an
        attach to its output, then the go file (the env); None (nothing left behind) when the
        pool has none or it failed, for the cold path to start one."""
        assert self.pool is not None and spec.workspace is not None
        asked = time.monotonic()
        member = self.pool.take(spec.run_id, wait=warm.FILL_WAIT_SECONDS)
        waited = (time.monotonic() - asked) * 1000
        if member is None:
            log.info("no warm sandbox for run %s after %.0f ms: a cold start", spec.run_id, waited)
            return None
        log.info("run %s takes the warm sandbox %s after %.0f ms", spec.run_id, member.name, waited)
        handle = SandboxHandle(id=member.id, run_id=spec.run_id)
        host_workdir = Path(member.workdir)
        self._volumes[handle.id] = member.volume
        self._workdirs[handle.id] = (spec.workdir, host_workdir)
        try:
            self._put_workspace(handle, spec.workdir, spec.workspace, host_workdir)
            self._attach(handle)
            warm.send_go(host_workdir, spec.env, spec.command[-1])
        except (SandboxError, OSError):
            try:
                self.remove(handle)
            except SandboxError:
                pass  # the reaper removes it: claimed by a run that is not running on it
            return None
        # Its successor, started as this run's sandbox exits (or runs on): the next launch finds it.
        self.pool.fill_later(lambda: self._exited(handle, timeout=warm.FILL_AFTER_TAKE_SECONDS))
        return handle

    def _exited(self, handle: SandboxHandle, *, timeout: float) -> None:
        """Return once the sandbox has exited (or is gone), or after `timeout` s."""
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            self.client.api.wait(handle.id, timeout=timeout)

    def _resolv_conf(self, network_mode: str) -> Path | None:
        """The host file mounted as a sandbox's /etc/resolv.conf on a user-defined network:
        the host's nameservers, asked straight (the embedded resolver at 127.0.0.11 would
        forward there too, after answering the other containers' names itself). None on the
        host's own or Docker's default networks, without a data_dir, or when the host has no
        nameserver but loopback ones (then Docker's resolver, which knows their upstreams)."""
        if network_mode in ("host", "none", "bridge", "default", "") or self.data_dir is None:
            return None
        if network_mode.startswith("container:"):
            return None
        servers = network.host_resolvers()
        if not servers:
            return None
        text = "".join(f"nameserver {server}\n" for server in servers)
        path = self.data_dir / "resolv.conf"
        with self._lock:
            try:
                if path.read_text() == text:
                    return path
            except FileNotFoundError:
                pass
            partial = path.with_name(f".resolv.conf.{os.getpid()}.{secrets.token_hex(4)}")
            partial.write_text(text)
            partial.chmod(0o644)
            os.replace(partial, path)  # a sandbox starting meanwhile sees the old or the new
        return path

    def _make_warm(self, spec: SandboxSpec) -> warm.Member:
        """Start a pool member of `spec` (`warm.waiter_spec`'s): not managed, no run yet."""
        self.beat()
        name = container_name()
        volume, mounts = self._allocate(spec, name)
        workdir = next((src for src, m in mounts.items() if m["bind"] == spec.workdir), "")
        try:
            handle = self._create(spec, name, mounts, volume, managed=False)
        except BaseException:
            if volume:
                volumes.release(self.data_dir, volume)
            raise
        self._volumes.pop(handle.id, None)  # the process that takes it learns it from the pool
        try:
            with docker_errors("start a warm sandbox"):
                image_id = self.client.api.inspect_container(handle.id)["Image"]
                self.client.api.start(handle.id)
        except BaseException:
            self._remove(handle)
            raise
        return warm.Member(
            id=handle.id,
            name=name,
            key=spec.labels.get(warm.LABEL_WARM, ""),
            image_id=image_id,
            workdir=workdir,
            volume=volume,
            created=time.time(),
            instance=self.instance or "",
            engine=spec.labels.get(warm.LABEL_WARM_ENGINE, ""),
        )

    def make_spare(self) -> str | None:
        """A spare quota volume for the next sandbox like the last one launched here (see
        `spare_volumes`); its name, or None when none was needed or could be made."""
        if not self.spare_volumes or self._spare_layout is None or self.data_dir is None:
            return None
        return volumes.make_spare(
            self.client,
            **self._spare_layout,
            data_dir=self.data_dir,
            reserve_bytes=self.reserve_bytes,
            keep=self.spare_volumes,
            owner=self.instance or "",
        )

    def sweep_warm(self) -> list[str]:
        """Remove this engine's stale warm sandboxes, then fill the pool (`WarmPool.sweep`)."""
        if self.pool is None:
            return []
        with docker_errors("sweep the warm sandboxes"):
            return self.pool.sweep()

    def sweep_volumes(self) -> list[str]:
        """Release quota volumes whose container is gone, and free spares of platforms gone
        from this host (see `volumes.sweep`)."""
        if self.data_dir is None:
            return []
        return volumes.sweep(self.client, self.data_dir, gone=self._gone)

    def _gone(self, instance: str) -> bool:
        assert self.data_dir is not None
        return instance != self.instance and instances.gone(
            self.data_dir, instance, stale=self.instance_stale, made=time.time()
        )

    def beat(self) -> None:
        """This platform instance is alive on this host (`instances.beat`)."""
        if self.data_dir is not None:
            instances.beat(self.data_dir, self.instance)

    def sweep_gone_instances(self) -> list[str]:
        """Beat, then remove this engine's sandboxes of platform instances gone from this host
        (no heartbeat for `instance_stale` s) with their quota volumes (`instances.sweep_gone`);
        the ids removed."""
        if self.data_dir is None or not self.instance:
            return []
        with docker_errors("sweep the sandboxes of gone platforms"):
            return instances.sweep_gone(
                self.client,
                data_dir=self.data_dir,
                instance=self.instance,
                engine=self.warm_engine,
                stale=self.instance_stale,
                remove=lambda container_id, run_id: self._remove(
                    SandboxHandle(container_id, run_id)
                ),
            )

    def _volume_of(self, handle: SandboxHandle) -> str | None:
        """The quota volume's name from the container's label (a sandbox another process made)."""
        try:
            labels = self.client.api.inspect_container(handle.id)["Config"]["Labels"] or {}
        except (docker.errors.DockerException, requests.RequestException):
            return None
        return labels.get(volumes.LABEL_VOLUME)
