"""The Docker sandbox backend (docker SDK 7.x), see `runs.sandbox.base.SandboxBackend`.

Every container runs as uid:gid 1000:1000 with all capabilities dropped, no-new-privileges,
an init process, CPU/memory/pids limits, capped json-file logs, no Docker socket and no
privileged mode. It is labelled `belvedir.managed=1` and `belvedir.run_id=<run id>`.
"""

from __future__ import annotations

import io
import re
import secrets
import tarfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors
import requests
from docker.models.containers import Container
from docker.types import DeviceRequest, LogConfig

from runs.sandbox.base import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_RUN_ID,
    SANDBOX_GID,
    SANDBOX_UID,
    SandboxError,
    SandboxFileTooLarge,
    SandboxHandle,
    SandboxInfo,
    instance_id,
)

# Go's os.FileMode bits, as in the X-Docker-Container-Path-Stat header of get_archive.
_GO_MODE_DIR = 1 << 31
_GO_MODE_SYMLINK = 1 << 27
_LOG_LIMITS = {"max-size": "10m", "max-file": "2"}


class DockerBackend:
    """Runs sandboxes as containers on one Docker engine."""

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        ca_bundle_mount: str | None = None,
        instance: str | None = None,
    ) -> None:
        """`ca_bundle_mount`: a host CA bundle to mount read-only over the image's one.

        `instance`: labels this platform's sandboxes, so that several platforms (or test
        sessions) sharing one engine only ever list, and reap, their own.
        """
        self._client = client
        self.ca_bundle_mount = ca_bundle_mount
        self.instance = instance

    @classmethod
    def from_settings(cls) -> DockerBackend:
        """A backend configured from settings (BELVEDIR_SANDBOX_CA_MOUNT: a host path)."""
        from django.conf import settings

        return cls(
            ca_bundle_mount=getattr(settings, "BELVEDIR_SANDBOX_CA_MOUNT", None) or None,
            instance=instance_id(),
        )

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            with _docker_errors("connect to the Docker engine"):
                self._client = docker.from_env()
        return self._client

    # --- lifecycle ------------------------------------------------------------------------

    def create(
        self,
        *,
        run_id: str,
        image: str,
        command: list[str],
        env: dict[str, str],
        workdir: str,
        network: str,
        cpus: float,
        memory: str,
        pids: int,
        gpu: bool = False,
    ) -> SandboxHandle:
        """Create (not start) the container for `run_id`; see the module docstring.

        `network` is a Docker network mode or name ("bridge", "host", "none", …); on
        networks other than host/none, `host.docker.internal` points at the host.
        `gpu=True` requests every GPU of the host (GPU queues run one sandbox at a time).
        """
        if not command:
            raise SandboxError("a sandbox needs a command")
        options: dict[str, object] = {}
        if network not in ("host", "none"):
            options["extra_hosts"] = {"host.docker.internal": "host-gateway"}
        if gpu:
            options["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if self.ca_bundle_mount:
            options["volumes"] = {
                self.ca_bundle_mount: {"bind": "/etc/ssl/certs/ca-certificates.crt", "mode": "ro"}
            }
        with _docker_errors(f"create the sandbox for run {run_id}", image=image):
            container = self.client.containers.create(
                image=image,
                command=command,
                name=_container_name(run_id),
                environment=env,
                working_dir=workdir,
                user=f"{SANDBOX_UID}:{SANDBOX_GID}",
                labels=self._labels({LABEL_MANAGED: "1", LABEL_RUN_ID: run_id}),
                network_mode=network,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                privileged=False,
                init=True,
                pids_limit=pids,
                nano_cpus=int(cpus * 1_000_000_000),
                mem_limit=memory,
                memswap_limit=memory,
                log_config=LogConfig(type=LogConfig.types.JSON, config=_LOG_LIMITS),
                auto_remove=False,
                stdin_open=False,
                tty=False,
                **options,
            )
        return SandboxHandle(id=container.id, run_id=run_id)

    def put_files(self, handle: SandboxHandle, dest_dir: str, archive: bytes | Path) -> None:
        """Unpack a tar (bytes or a .tar path) into `dest_dir`, which must exist.

        Ownership comes from the tar: build it with `tar_directory`/`tar_files` (uid 1000).
        """
        data = archive.read_bytes() if isinstance(archive, Path) else archive
        with _docker_errors(f"copy files into {dest_dir}"):
            if not self._container(handle).put_archive(dest_dir, data):
                raise SandboxError(f"could not copy files into {dest_dir} of the sandbox")

    def start(self, handle: SandboxHandle) -> None:
        with _docker_errors("start the sandbox"):
            self._container(handle).start()

    def stream_logs(self, handle: SandboxHandle) -> Iterator[bytes]:
        """Yield stdout+stderr chunks as they arrive, from the start, until the container stops."""
        with _docker_errors("read the sandbox output"):
            stream = self._container(handle).logs(
                stdout=True, stderr=True, stream=True, follow=True
            )
            yield from stream

    def wait(self, handle: SandboxHandle, timeout: float) -> int | None:
        """The exit code, or None if the container is still running after `timeout` s."""
        container = self._container(handle)
        started = time.monotonic()
        try:
            result = container.wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
            if time.monotonic() - started >= timeout * 0.9:
                return None
            raise SandboxError(f"could not wait for the sandbox: {_short(exc)}") from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(f"could not wait for the sandbox: {_short(exc)}") from exc
        return int(result.get("StatusCode", -1))

    def read_file(self, handle: SandboxHandle, path: str, max_bytes: int) -> bytes | None:
        """A regular file's bytes, also after the container stopped; None if it is missing.

        Raises SandboxFileTooLarge when it is over `max_bytes` (checked before reading),
        SandboxError when `path` is a directory, a symlink or anything but a regular file.
        """
        container = self._container(handle)
        try:
            stream, info = container.get_archive(path)
        except docker.errors.NotFound:
            self._container(handle)  # raises SandboxError when the container itself is gone
            return None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not read {path} from the sandbox: {_short(exc)}") from exc

        mode, size = int(info.get("mode", 0)), int(info.get("size", 0))
        if mode & _GO_MODE_SYMLINK or info.get("linkTarget"):
            raise SandboxError(f"{path} is a symlink, not a regular file")
        if mode & _GO_MODE_DIR:
            raise SandboxError(f"{path} is a directory, not a regular file")
        if size > max_bytes:
            stream.close()
            raise SandboxFileTooLarge(path, size, max_bytes)

        with _docker_errors(f"read {path} from the sandbox"):
            archive = _read_capped(stream, limit=max_bytes + 64 * 1024)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise SandboxError(f"{path} is not a regular file")
            if member.size > max_bytes:
                raise SandboxFileTooLarge(path, member.size, max_bytes)
            extracted = tar.extractfile(member)
            assert extracted is not None
            return extracted.read()

    def kill(self, handle: SandboxHandle) -> None:
        """SIGKILL the container; a container that is not running is left as it is."""
        try:
            self.client.api.kill(handle.id)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if exc.status_code == 409 or "is not running" in str(exc):
                return
            raise SandboxError(f"could not kill the sandbox: {_short(exc)}") from exc
        except requests.RequestException as exc:
            raise SandboxError(f"could not kill the sandbox: {_short(exc)}") from exc

    def remove(self, handle: SandboxHandle) -> None:
        """Remove the container (killing it if needed) and its anonymous volumes."""
        try:
            self.client.api.remove_container(handle.id, force=True, v=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if "already in progress" in str(exc):
                return
            raise SandboxError(f"could not remove the sandbox: {_short(exc)}") from exc
        except requests.RequestException as exc:
            raise SandboxError(f"could not remove the sandbox: {_short(exc)}") from exc

    # --- finding sandboxes again ----------------------------------------------------------

    def list_by_label(self, label_filter: Mapping[str, str] | None = None) -> list[SandboxInfo]:
        """Managed containers (any state), narrowed by extra `label: value` pairs."""
        labels = self._labels({LABEL_MANAGED: "1", **(label_filter or {})})
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        with _docker_errors("list sandboxes"):
            containers = self.client.api.containers(all=True, filters=filters)
        return [
            SandboxInfo(
                run_id=(item.get("Labels") or {}).get(LABEL_RUN_ID, ""),
                id=item["Id"],
                status=item.get("State", ""),
            )
            for item in containers
        ]

    def _labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {**labels, LABEL_INSTANCE: self.instance} if self.instance else labels

    def kill_by_run_id(self, run_id: str) -> int:
        """SIGKILL every running sandbox of `run_id`; return how many there were."""
        running = [
            info for info in self.list_by_label({LABEL_RUN_ID: run_id}) if info.status == "running"
        ]
        for info in running:
            self.kill(SandboxHandle(id=info.id, run_id=run_id))
        return len(running)

    # --- internals ------------------------------------------------------------------------

    def _container(self, handle: SandboxHandle) -> Container:
        try:
            return self.client.containers.get(handle.id)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"the sandbox of run {handle.run_id} no longer exists") from exc
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not look up the sandbox: {_short(exc)}") from exc


@contextmanager
def _docker_errors(action: str, *, image: str | None = None) -> Iterator[None]:
    """Turn docker SDK and HTTP errors into SandboxError("could not <action>: …")."""
    try:
        yield
    except SandboxError:
        raise
    except docker.errors.ImageNotFound as exc:
        hint = f"image {image} is missing; run `python manage.py sandbox_image`" if image else ""
        raise SandboxError(f"could not {action}: {hint or _short(exc)}") from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not {action}: {_short(exc)}") from exc


def _read_capped(stream: Iterator[bytes], *, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    for chunk in stream:
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise SandboxError(f"the archive grew past {limit} bytes while reading it")
    return b"".join(chunks)


def _container_name(run_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", run_id)[:80]
    return f"belvedir-{safe}-{secrets.token_hex(3)}"


def _short(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip()[:300]
