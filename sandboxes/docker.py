"""The Docker sandbox backend (docker SDK 7.x), see `sandboxes.base.SandboxBackend`.

Every container runs as uid:gid 1000:1000 with all capabilities dropped, no-new-privileges,
an init process, CPU/memory/pids limits, capped json-file logs, no Docker socket and no
privileged mode. It is labelled `belvedir.managed=1` and `belvedir.run_id=<run id>`; its
name is random (`belvedir-<16 hex>`) and it has no network aliases, so Docker's embedded DNS
(which answers any container's name on the network) gives away no run id. On a user-defined
network it is given the host's nameservers (`network.host_resolvers`, the ones the firewall
lets sandboxes ask) in an `/etc/resolv.conf` of its own instead of the embedded resolver, so
its lookups never ask a resolver that knows the other sandboxes' names.

With a disk quota (`spec.disk_bytes`, and a `data_dir` for the backend) its root filesystem
is read-only and its writable places are folders of its own quota volume
(`sandboxes.volumes`), released when the container is removed.

The output is read through an attach made before the start, not from the log file: it
holds every byte from the first one, and a reader that falls behind slows the harness down
instead of losing output to log rotation.
"""

from __future__ import annotations

import logging
import re
import secrets
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import docker
import docker.errors
import requests
from docker.models.containers import Container
from docker.types import DeviceRequest, LogConfig

from sandboxes import gpu, hostfiles, taskd, volumes, warm
from sandboxes.base import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_RUN_ID,
    SandboxError,
    SandboxHandle,
    SandboxInfo,
    SandboxSpec,
)
from sandboxes.config import SandboxConfig
from sandboxes.dockerhost import DockerHost
from sandboxes.engine import container_name, docker_errors, shared_client, short
from sandboxes.installs import DockerInstalls
from sandboxes.readback import DockerReadback
from sandboxes.taskbackend import DockerTaskSandboxes

_LOG_LIMITS = {"max-size": "10m", "max-file": "2"}
log = logging.getLogger(__name__)
PING_TIMEOUT = 5.0


class DockerBackend(DockerHost, DockerInstalls, DockerReadback, DockerTaskSandboxes):
    """Runs sandboxes as containers on one Docker engine. Its host's upkeep, the install cache,
    reading files back and task sandboxes' methods are mixed in (`sandboxes.dockerhost`,
    `.installs`, `.readback`, `.taskbackend`)."""

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        ca_bundle_mount: str | None = None,
        instance: str | None = None,
        data_dir: Path | None = None,
        reserve_bytes: int = 0,
        spare_volumes: int = 0,
        warm_size: int = 0,
        warm_template: SandboxSpec | None = None,
        warm_engine: str = "",
        warm_max_age: float = 3600.0,
        instance_stale: float = 600.0,
        install_cache_bytes: int = 0,
        task_exec_server: Path | None = None,
    ) -> None:
        """`client`: the engine to use (default: `shared_client()`, i.e. DOCKER_HOST).

        `ca_bundle_mount`: a host CA bundle to mount read-only over the image's one.
        `instance`: labels this platform's sandboxes, so that several platforms (or test
        sessions) sharing one engine only ever list, and reap, their own.
        `data_dir`: where quota volumes live (needed for `spec.disk_bytes`); new ones are
        refused unless the disk keeps `reserve_bytes` free with every volume full.
        `spare_volumes`: how many quota volumes to keep made ahead on this host, each made
        after a sandbox is removed and taken by the next one (`volumes.make_spare`).
        `warm_size`: how many sandboxes of `warm_template`'s shape to keep started ahead on
        this host for runs of that shape (`sandboxes.warm`; needs a disk quota), on the
        engine named `warm_engine`, each removed unused after `warm_max_age` s.
        `instance_stale`: how long another instance may go without a heartbeat on this host
        before its sandboxes here are removed (`sweep_gone_instances`).
        `install_cache_bytes`: the install cache's budget on this host (0: no cache).
        `task_exec_server`: the exec server binary task sandboxes start with (`sandboxes.taskd`).
        """
        self._client = client
        self.ca_bundle_mount = ca_bundle_mount
        self.instance = instance
        self.data_dir = data_dir
        self.reserve_bytes = reserve_bytes
        self.spare_volumes = spare_volumes
        self.warm_engine = warm_engine
        self.instance_stale = instance_stale
        self.install_cache_bytes = install_cache_bytes
        self.task_exec_server = task_exec_server
        self._saves = {}  # container id -> its install snapshot's thread and result
        self._restored = {}  # container id -> the spec and install snapshot it started from
        self._spare_layout: dict[str, object] | None = None  # the last quota sandbox's
        self._attached: dict[str, Iterator[bytes]] = {}
        self._volumes: dict[str, str] = {}  # container id -> its quota volume
        # container id -> (its workdir, the quota volume's folder mounted there, on this host)
        self._workdirs: dict[str, tuple[str, Path]] = {}
        self._disk_full: set[str] = set()  # container ids whose volume was seen full
        self._lock = threading.Lock()
        self.pool: warm.WarmPool | None = None
        if warm_template is not None and warm_template.disk_bytes and data_dir is not None:
            self.pool = warm.WarmPool(
                lambda: self.client,
                data_dir=data_dir,
                template=warm_template,
                engine=warm_engine,
                size=warm_size,
                max_age=warm_max_age,
                instance=instance,
                make=self._make_warm,
                discard=lambda container_id: self._remove(SandboxHandle(container_id, "")),
            )

    @classmethod
    def from_config(
        cls, config: SandboxConfig, client: docker.DockerClient | None = None
    ) -> DockerBackend:
        """The backend `config` describes, on `client`'s engine (default: DOCKER_HOST's)."""
        return cls(
            client,
            ca_bundle_mount=config.ca_bundle_mount,
            instance=config.instance,
            data_dir=config.data_dir,
            reserve_bytes=config.reserve_bytes,
            spare_volumes=config.spare_volumes,
            warm_size=config.warm_size,
            warm_template=config.warm_template,
            warm_engine=config.warm_engine,
            warm_max_age=config.warm_max_age,
            instance_stale=config.instance_stale,
            install_cache_bytes=config.install_cache_bytes,
            task_exec_server=config.task_exec_server,
        )

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = shared_client()
        return self._client

    def ping(self) -> None:
        """Return if the engine answers /_ping within a few seconds; SandboxError if not."""
        with docker_errors("reach the Docker engine"):
            api = self.client.api
            api.get(f"{api.base_url}/_ping", timeout=PING_TIMEOUT).raise_for_status()

    # --- lifecycle ------------------------------------------------------------------------

    def launch(self, spec: SandboxSpec) -> SandboxHandle:
        """Create the container, copy the workspace in, attach to its output, start it.

        `spec.network` is a Docker network mode or name (the isolated `belvedir-sandbox`
        network by default); the platform is reached at the gateway address the contract's
        `BELVEDIR_BASE_URL` names, never through `host.docker.internal` (the host is closed).
        `spec.gpu_device` requests that one GPU by its device id (never all of the host's),
        with CUDA and nvidia-smi (`sandboxes.gpu`); `spec.shm_bytes` sizes its /dev/shm.
        `spec.runtime` picks the OCI runtime ("runsc" for gVisor) when set.
        `spec.disk_bytes`: a read-only root and a quota volume of that size for the rest.
        A spec of the warm pool's shape takes a sandbox started ahead when there is one; any
        spec whose quota volume finds no room on the disk has the pool's waiting sandboxes
        removed (each holds a volume's promise) and tries once more.
        """
        if not spec.command:
            raise SandboxError("a sandbox needs a command")
        self.beat()
        restoring = spec.install_cache is not None and spec.install_cache.restore
        if self.pool is not None and self.pool.fits(spec) and not restoring:
            handle = self._launch_warm(spec)
            if handle is not None:
                self._watch_install(handle, spec)
                return handle
        name = container_name()
        stem = _volume_stem(spec.run_id)  # a host folder: named by its run, for operators
        try:
            volume, mounts = self._allocate(spec, stem)
        except volumes.NoRoom:
            # Waiting sandboxes give their disk to a run: each holds a quota volume's promise,
            # as do the sandboxes of platforms gone from this host.
            drained = self.pool.drain() if self.pool is not None else []
            if not drained and not self.sweep_gone_instances():
                raise
            log.info(
                "run %s: warm sandboxes or a gone platform's sandboxes were removed to make "
                "room on the disk",
                spec.run_id,
            )
            volume, mounts = self._allocate(spec, stem)
        try:
            handle = self._create(spec, name, mounts, volume)
        except BaseException:
            if volume:
                volumes.release(self.data_dir, volume)
            raise
        try:
            host_workdir = next(
                (Path(src) for src, mount in mounts.items() if mount["bind"] == spec.workdir),
                None,
            )
            if host_workdir is not None:
                self._workdirs[handle.id] = (spec.workdir, host_workdir)
            if spec.workspace is not None:
                self._put_workspace(handle, spec.workdir, spec.workspace, host_workdir)
            self._attach(handle)
            with docker_errors("start the sandbox"):
                self.client.api.start(handle.id)
            if spec.exec_server:
                taskd.wait_listening(self.client, handle.id)
        except BaseException:
            self._forget_stream(handle)
            try:
                self.remove(handle)
            except SandboxError:
                pass  # the reaper removes it: it is labelled and has no running run
            raise
        self._watch_install(handle, spec)
        return handle

    def _attach(self, handle: SandboxHandle) -> None:
        """Attach to the sandbox's output from now on (before its command says anything)."""
        with docker_errors("attach to the sandbox output"):
            stream = self.client.api.attach(
                handle.id, stdout=True, stderr=True, stream=True, logs=False
            )
        with self._lock:
            self._attached[handle.id] = stream

    def _create(
        self,
        spec: SandboxSpec,
        name: str,
        mounts: dict[str, dict[str, str]],
        volume: str = "",
        *,
        managed: bool = True,
    ) -> SandboxHandle:
        options: dict[str, object] = {}
        binds = dict(mounts)
        if spec.gpu_device:
            options["device_requests"] = [
                DeviceRequest(
                    device_ids=[spec.gpu_device], capabilities=gpu.device_request_capabilities()
                )
            ]
        if spec.shm_bytes:
            options["shm_size"] = spec.shm_bytes
        if spec.runtime:
            options["runtime"] = spec.runtime
        if spec.user:
            options["user"] = spec.user
        if spec.cap_add:
            options["cap_add"] = list(spec.cap_add)
        if self.ca_bundle_mount:
            binds[self.ca_bundle_mount] = {
                "bind": "/etc/ssl/certs/ca-certificates.crt",
                "mode": "ro",
            }
        resolv_conf = self._resolv_conf(spec.network)
        if resolv_conf is not None:
            binds[str(resolv_conf)] = {"bind": "/etc/resolv.conf", "mode": "ro"}
        command, served = spec.command, {taskd.LABEL: ""}
        if spec.exec_server and taskd.usable(self.client, self.task_exec_server, spec.network):
            command, bind, served = taskd.container_parts(self.task_exec_server)
            binds.update(bind)
        if binds:
            options["volumes"] = binds
        own = {LABEL_MANAGED: "1", LABEL_RUN_ID: spec.run_id} if managed else {}
        labels = self._labels({**spec.labels, **own})
        # Always set, so an image's own label (a task image's `LABEL belvedir.volume=…`) can
        # never name another sandbox's volume for `remove` to release, nor a token of its own.
        labels[volumes.LABEL_VOLUME] = volume
        labels.update(served)
        if mounts:
            options["read_only"] = True
        with docker_errors(f"create the sandbox for run {spec.run_id}", image=spec.image):
            container = self.client.containers.create(
                image=spec.image,
                command=command,
                name=name,
                environment=spec.env,
                working_dir=spec.workdir,
                labels=labels,
                network_mode=spec.network,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                privileged=False,
                init=True,
                pids_limit=spec.pids,
                nano_cpus=int(spec.cpus * 1_000_000_000),
                mem_limit=spec.memory,
                memswap_limit=spec.memory,
                log_config=LogConfig(type=LogConfig.types.JSON, config=_LOG_LIMITS),
                auto_remove=False,
                stdin_open=False,
                tty=False,
                **options,
            )
        if volume:
            self._volumes[container.id] = volume
        return SandboxHandle(id=container.id, run_id=spec.run_id)

    def _put_workspace(
        self,
        handle: SandboxHandle,
        workdir: str,
        archive: bytes | Path,
        host_workdir: Path | None = None,
    ) -> None:
        """Unpack the workspace into the workdir: straight into its quota volume's folder on
        this host when it has one (`hostfiles`), else through the engine."""
        if host_workdir is not None:
            try:
                if hostfiles.unpack_workspace(archive, host_workdir):
                    return
            except (OSError, tarfile.TarError) as exc:
                raise SandboxError(f"could not copy the workspace into {workdir}: {exc}") from exc
        with docker_errors(f"copy the workspace into {workdir}"):
            if isinstance(archive, Path):
                with archive.open("rb") as data:
                    done = self.client.api.put_archive(handle.id, workdir, data)
            else:
                done = self.client.api.put_archive(handle.id, workdir, archive)
        if not done:
            raise SandboxError(f"could not copy the workspace into {workdir} of the sandbox")

    def stream_logs(self, handle: SandboxHandle) -> Iterator[bytes]:
        """Every output chunk from the first one, as it arrives, until the container stops.

        The attach made by `launch` when this backend launched it; otherwise (another
        process's sandbox) the engine's log from its start.
        """
        with self._lock:
            attached = self._attached.get(handle.id)
        try:
            with docker_errors("read the sandbox output"):
                if attached is not None:
                    yield from attached
                else:
                    yield from self._container(handle).logs(
                        stdout=True, stderr=True, stream=True, follow=True
                    )
        finally:
            self._forget_stream(handle)

    def wait(self, handle: SandboxHandle, timeout: float) -> int | None:
        """The exit code, or None if the container is still running after `timeout` s."""
        container = self._container(handle)
        started = time.monotonic()
        try:
            result = container.wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
            if time.monotonic() - started >= timeout * 0.9:
                return None
            raise SandboxError(f"could not wait for the sandbox: {short(exc)}") from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(f"could not wait for the sandbox: {short(exc)}") from exc
        finally:
            self._note_disk(handle)
        return int(result.get("StatusCode", -1))

    def kill(self, handle: SandboxHandle) -> None:
        """SIGKILL the container; a container that is not running is left as it is."""
        try:
            self.client.api.kill(handle.id)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if exc.status_code == 409 or "is not running" in str(exc):
                return
            raise SandboxError(f"could not kill the sandbox: {short(exc)}") from exc
        except requests.RequestException as exc:
            raise SandboxError(f"could not kill the sandbox: {short(exc)}") from exc

    def remove(self, handle: SandboxHandle) -> None:
        """Remove the container (killing it if needed), its anonymous volumes and its quota
        volume; a warm sandbox's record in the pool too, and the pool is filled again."""
        self._remove(handle)
        if self.pool is not None:
            self.pool.forget(handle.id)
            self.pool.fill_later()

    def _remove(self, handle: SandboxHandle) -> None:
        self._forget_stream(handle)
        volume = self._volumes.pop(handle.id, None) or self._volume_of(handle)
        self._workdirs.pop(handle.id, None)
        self._disk_full.discard(handle.id)
        taskd.forget(handle.id)  # its address may be another container's next
        try:
            self.client.api.remove_container(handle.id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise SandboxError(f"could not remove the sandbox: {short(exc)}") from exc
        except requests.RequestException as exc:
            raise SandboxError(f"could not remove the sandbox: {short(exc)}") from exc
        if volume and self.data_dir is not None:
            volumes.release(self.data_dir, volume)
        self.make_spare()
        self._forget_install(handle.id)  # and a restored sandbox's successor, made ahead

    # --- finding sandboxes again ----------------------------------------------------------

    def list_by_label(self, label_filter: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Managed containers (any state), narrowed by extra `label: value` pairs."""
        labels = self._labels({LABEL_MANAGED: "1", **(label_filter or {})})
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        with docker_errors("list sandboxes"):
            containers = self.client.api.containers(all=True, filters=filters)
            found = [
                SandboxInfo(
                    run_id=(item.get("Labels") or {}).get(LABEL_RUN_ID, ""),
                    id=item["Id"],
                    status=item.get("State", ""),
                )
                for item in containers
            ]
            if self.pool is not None:  # warm sandboxes a run took: listed under its id
                wanted = dict(label_filter or {})
                run_id = wanted.pop(LABEL_RUN_ID, None)
                found += [
                    SandboxInfo(run_id=owner, id=item["Id"], status=item.get("State", ""))
                    for owner, item in self.pool.listed_claimed(wanted)
                    if run_id is None or owner == run_id
                ]
        return found

    def list_with_label(
        self, label: str, label_filter: Mapping[str, str] | None = None
    ) -> list[tuple[SandboxInfo, str]]:
        """Managed containers (any state) that carry `label`, narrowed by extra `label: value`
        pairs, each with its value of `label` (a warm sandbox a run took carries none of its
        own: only the backend's labels and the pool's)."""
        labels = self._labels({LABEL_MANAGED: "1", **(label_filter or {})})
        wanted = [f"{key}={value}" for key, value in labels.items()] + [label]
        with docker_errors("list sandboxes"):
            containers = self.client.api.containers(all=True, filters={"label": wanted})
        found = []
        for item in containers:
            item_labels = item.get("Labels") or {}
            info = SandboxInfo(
                run_id=item_labels.get(LABEL_RUN_ID, ""),
                id=item["Id"],
                status=item.get("State", ""),
            )
            found.append((info, item_labels.get(label, "")))
        return found

    def detach(self, handle: SandboxHandle) -> None:
        """Close the attach `launch` made to the sandbox's output: nobody will read it."""
        self._forget_stream(handle)

    # --- internals ------------------------------------------------------------------------

    def run_labels(self, run_id: str) -> dict[str, str]:
        """What labels a container as one of `run_id`'s: the reaper removes it once the run
        is no longer running (e.g. a task image build's step)."""
        return self._labels({LABEL_MANAGED: "1", LABEL_RUN_ID: run_id})

    def _labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {**labels, LABEL_INSTANCE: self.instance} if self.instance else labels

    def _forget_stream(self, handle: SandboxHandle) -> None:
        with self._lock:
            stream = self._attached.pop(handle.id, None)
        if stream is not None:
            try:
                stream.close()  # type: ignore[attr-defined]  # a docker CancellableStream
            except Exception:  # best effort: the stream also ends with the container
                pass

    def _container(self, handle: SandboxHandle) -> Container:
        try:
            return self.client.containers.get(handle.id)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"the sandbox of run {handle.run_id} no longer exists") from exc
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not look up the sandbox: {short(exc)}") from exc


def _volume_stem(run_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", run_id)[:80]
    return f"belvedir-{safe}-{secrets.token_hex(3)}"
