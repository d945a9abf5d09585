"""The Belvedir Harbor environment: each task's container is a platform task sandbox.

    harbor run -p ./env --env belvedir_harbor.environment:BelvedirEnvironment -a oracle -y

Harbor loads it through its own extension point for custom environments (`--env
module.path:ClassName`). It asks the platform at `BELVEDIR_BASE_URL`, with the run's key
`BELVEDIR_API_KEY`, to build the task's `environment/` directory (its Dockerfile's base must be
an image the platform's engine has when offline), start the container, exec commands (output
streamed back), move files in and out as tar archives, and stop it (docs/task-sandboxes.md).
"""

from __future__ import annotations

import asyncio
import shlex
import tempfile
from pathlib import Path

from harbor.environments.base import BaseEnvironment, ExecResult, SandboxBuildFailedError
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.trial.paths import EnvironmentPaths

from belvedir_harbor.platform import PlatformError, TaskSandboxes
from belvedir_harbor.stops import STOPS

ENVIRONMENT_TYPE = "belvedir"


class BelvedirEnvironment(BaseEnvironment):
    """A task sandbox on the Belvedir platform, through its HTTP API."""

    def __init__(self, *args, **kwargs) -> None:
        self._sandbox_id: str | None = None
        self._client: TaskSandboxes | None = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return ENVIRONMENT_TYPE

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities()

    def _validate_definition(self) -> None:
        dockerfile = self.environment_dir / "Dockerfile"
        if not dockerfile.is_file() and not self.task_env_config.docker_image:
            raise FileNotFoundError(
                f"{dockerfile} not found: a Belvedir task sandbox is built from the task's "
                "environment/Dockerfile (or [environment].docker_image)."
            )

    @property
    def client(self) -> TaskSandboxes:
        if self._client is None:
            try:
                self._client = TaskSandboxes()
            except PlatformError as exc:
                raise RuntimeError(str(exc)) from None
        return self._client

    def _require(self) -> str:
        if self._sandbox_id is None:
            raise RuntimeError("The task sandbox is not running: start() it first.")
        return self._sandbox_id

    async def start(self, force_build: bool) -> None:
        # The platform caches images by the context's content; force_build builds it again.
        with tempfile.TemporaryDirectory() as folder:
            context = self.environment_dir
            if not (context / "Dockerfile").is_file():
                context = Path(folder)
                image = self.task_env_config.docker_image
                (context / "Dockerfile").write_text(f"FROM {image}\n")
            await asyncio.to_thread(STOPS.wait)  # the slots of the trials before
            try:
                answer = await asyncio.to_thread(
                    self.client.create, self.session_id, context, force_build=force_build
                )
            except PlatformError as exc:
                if exc.status == 400:
                    raise SandboxBuildFailedError(str(exc)) from None
                raise RuntimeError(str(exc)) from None
        self._sandbox_id = answer["id"]
        self.logger.debug(f"task sandbox {self._sandbox_id} ({answer.get('image')}) is running")
        if workdir := self.task_env_config.workdir:
            await self.exec(f"mkdir -p {shlex.quote(workdir)}", user="root")
        # Nothing is mounted from the host: the log folders Harbor's agents and verifiers
        # write into (and it downloads afterwards) are made here.
        paths = EnvironmentPaths.for_os(self.os)
        logs = [paths.agent_dir, paths.verifier_dir, paths.artifacts_dir]
        await self.ensure_dirs([*logs, *self._mount_targets(writable_only=True)])
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        # Removed either way, as Harbor's Docker environment removes its containers (`delete`
        # is about images and volumes; the platform keeps task images cached): a sandbox kept
        # would hold one of the run's HARBOR_CONCURRENCY slots until the run ends. Asked here,
        # answered in the background (belvedir_harbor/stops.py).
        if self._sandbox_id is None:
            return
        sandbox_id, self._sandbox_id = self._sandbox_id, None
        STOPS.start(self.client.stop, sandbox_id, self.logger)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        sandbox_id = self._require()
        user = self._resolve_user(user)  # None: the image's user, as `docker exec` without -u
        callback = self._output_callback()
        loop = asyncio.get_running_loop()
        on_output = None
        if callback is not None:

            def on_output(data: str, stream: str) -> None:
                asyncio.run_coroutine_threadsafe(callback(data, stream), loop).result()

        try:
            outcome = await asyncio.to_thread(
                self.client.exec,
                sandbox_id,
                command,
                cwd=cwd or self.task_env_config.workdir,
                env=self._merge_env(env),
                timeout_sec=timeout_sec,
                user=None if user is None else str(user),
                on_output=on_output,
            )
        except PlatformError as exc:
            raise RuntimeError(str(exc)) from None
        if outcome.timed_out:
            raise TimeoutError(f"Command timed out after {timeout_sec} seconds: {command}")
        return ExecResult(
            stdout=outcome.stdout, stderr=outcome.stderr, return_code=outcome.exit_code
        )

    async def _call(self, function, *args, **kwargs) -> None:
        try:
            await asyncio.to_thread(function, *args, **kwargs)
        except PlatformError as exc:
            raise RuntimeError(str(exc)) from None

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._call(self.client.upload_file, self._require(), Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._call(self.client.upload_dir, self._require(), Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self._call(
            self.client.download, self._require(), source_path, Path(target_path), as_dir=False
        )

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await self._call(
            self.client.download, self._require(), source_dir, Path(target_dir), as_dir=True
        )
