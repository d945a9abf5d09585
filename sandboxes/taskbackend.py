"""The Docker backend's part for task sandboxes (managed Harbor): the `SandboxBackend`
methods that build task images, run commands in a running sandbox and move files in and out
(`sandboxes.base`), on the engine the backend talks to. The work itself is in
`sandboxes.tasks`, `sandboxes.taskbuild`, `sandboxes.taskexec` and `sandboxes.taskfiles`; this
is where the backend hands them its client, its labels and its instance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sandboxes import taskexec, taskfiles, tasks
from sandboxes.base import LABEL_INSTANCE, BuiltImage, SandboxHandle, SandboxSpec

if TYPE_CHECKING:
    import docker

    from sandboxes.taskpolicy import Policy


class DockerTaskSandboxes:
    """Mixed into `DockerBackend`: it gives `client`, `instance` and `run_labels`."""

    client: docker.DockerClient
    instance: str | None
    run_labels: Callable[[str], dict[str, str]]

    def _image_labels(self) -> dict[str, str]:
        """This platform's mark on its task images (another platform on the engine reaps its own)."""
        return {LABEL_INSTANCE: self.instance} if self.instance else {}

    def image_tag(self, *, context: Path, digest: str, organization: str) -> str:
        return tasks.image_tag(tasks.image_key(self.client, context, digest, organization))

    def build_image(
        self,
        *,
        context: Path,
        tag: str,
        like: SandboxSpec,
        timeout: float,
        policy: Policy,
        force: bool = False,
    ) -> bool:
        return tasks.ensure_image(
            self.client,
            context=context,
            tag=tag,
            timeout=timeout,
            force=force,
            steps=tasks.step_limits(like, self.run_labels(like.run_id)),
            policy=policy,
            labels=self._image_labels(),
        )

    def image_workdir(self, image: str) -> str:
        return tasks.image_workdir(self.client, image)

    def built_images(self) -> list[BuiltImage]:
        return [
            BuiltImage(*found) for found in tasks.task_images(self.client, self._image_labels())
        ]

    def remove_image(self, image_id: str, tags: Sequence[str]) -> bool:
        return tasks.remove_task_image(self.client, image_id, list(tags))

    def written_bytes(self, handles: Sequence[SandboxHandle]) -> dict[str, int]:
        return tasks.written_bytes(self.client, [handle.id for handle in handles])

    def exec_stream(
        self,
        handle: SandboxHandle,
        *,
        command: str,
        cwd: str | None,
        env: Mapping[str, str],
        timeout: float,
        user: str = "",
    ) -> Iterator[dict]:
        return taskexec.exec_events(
            self.client,
            handle.id,
            command=command,
            cwd=cwd,
            env=dict(env),
            timeout=timeout,
            user=user,
        )

    def put_files(self, handle: SandboxHandle, *, path: str, chunks: Iterable[bytes]) -> None:
        taskfiles.put_tar(self.client, handle.id, path=path, chunks=chunks)

    def open_files(
        self, handle: SandboxHandle, *, path: str, max_bytes: int
    ) -> tuple[int | None, Iterator[bytes]]:
        return taskfiles.open_tar(self.client, handle.id, path=path, max_bytes=max_bytes)
