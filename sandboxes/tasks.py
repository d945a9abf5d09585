"""Task images on the Docker engine: what the managed Harbor workspace asks of the engine to
make a task sandbox (docs/task-sandboxes.md). Pure Python and docker SDK, no Django: build a
task's image from its environment directory (cached by content), find and remove the images
of past runs, measure what a task sandbox wrote. Commands and files in a running one:
`sandboxes.taskexec`.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import docker
import docker.errors
import requests

from sandboxes import dockerfile, taskbuild, taskpolicy
from sandboxes.base import SandboxError, SandboxSpec

IMAGE_REPOSITORY = "belvedir-task"
LABEL_TASK_IMAGE = "belvedir.task_image"
BUILD_LOG_TAIL = 3000
# Docker's default capabilities, less those a task has no use for (raw sockets, device nodes,
# audit, file capabilities, chroot): Harbor task images run as root and install packages.
TASK_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID")
TASK_CAPABILITIES += ("SETPCAP", "NET_BIND_SERVICE")


class BuildFailed(SandboxError):
    """The task's image did not build; the message ends with the build log's tail."""


def context_digest(path: Path, *, max_bytes: int | None = None) -> str:
    """The sha256 of a build context's content (a tar, gzip or not): each member's path, type,
    mode, link target and bytes, in name order; mtimes and owners do not count. SandboxError
    when it is not a tar, has no Dockerfile at its top or unpacks to more than `max_bytes`
    (a gzip bomb: the engine's builder would write it all to the platform's disk)."""
    members: list[tuple[str, bytes]] = []
    has_dockerfile = False
    unpacked = 0
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                unpacked += max(member.size, 0) + tarfile.BLOCKSIZE
                if max_bytes is not None and unpacked > max_bytes:
                    raise SandboxError(f"the context unpacks to more than {max_bytes // 2**20} MB")
                name = member.name.removeprefix("./").strip("/")
                if not name or name == ".":
                    continue
                if name.startswith("/") or ".." in name.split("/"):
                    raise SandboxError(f"the context holds a path outside it: {member.name}")
                has_dockerfile |= name == "Dockerfile" and member.isfile()
                digest = hashlib.sha256()
                digest.update(f"{name}\0{member.type!r}\0{member.mode & 0o7777}\0".encode())
                digest.update(member.linkname.encode())
                if member.isfile():
                    data = tar.extractfile(member)
                    assert data is not None
                    while chunk := data.read(1 << 20):
                        digest.update(chunk)
                members.append((name, digest.digest()))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SandboxError(f"the context is not a tar or tar.gz archive ({exc})") from None
    if not has_dockerfile:
        raise SandboxError("the context has no Dockerfile at its top")
    total = hashlib.sha256()
    for name, digest in sorted(members):
        total.update(name.encode() + b"\0" + digest)
    return total.hexdigest()


def image_tag(digest: str) -> str:
    return f"{IMAGE_REPOSITORY}:{digest[:40]}"


def dockerfile_bases(path: Path) -> list[str]:
    """The images a build context's Dockerfile builds FROM, in order (its own stages and
    `scratch` left out); [] when it cannot be read."""
    try:
        with tarfile.open(path, mode="r:*") as tar:
            member = next(
                (m for m in tar if m.name.removeprefix("./").strip("/") == "Dockerfile"), None
            )
            data = tar.extractfile(member) if member is not None and member.isfile() else None
            text = data.read().decode("utf-8", "replace") if data is not None else ""
    except (tarfile.TarError, OSError, EOFError):
        return []
    # taskbuild's reading of the Dockerfile: continuations, comments, the escape directive,
    # and global ARGs expanded in FROM as the build expands them.
    bases: list[str] = []
    stages: set[str] = {"scratch"}
    values: dict[str, str] = {}  # the ARGs before the first FROM
    seen_from = False
    for step in dockerfile.parse(text):
        if step.keyword == "ARG" and not seen_from:
            name, default = dockerfile.arg(step.rest)
            values[name] = dockerfile.expand(default or "", values)
            continue
        if step.keyword != "FROM":
            continue
        seen_from = True
        rest = [w for w in step.rest.split() if not w.startswith("--")]
        if not rest:
            continue
        base = dockerfile.expand(rest[0], values)
        if base.lower() not in stages:
            bases.append(base)
        if len(rest) >= 3 and rest[1].upper() == "AS":
            stages.add(rest[2].lower())
    return bases


def image_key(client: docker.DockerClient, context: Path, digest: str, organization: str) -> str:
    """The task image's cache key: the organization (one organization's images are never
    another's), the context's digest and the id of each base image the engine holds, so a
    rebuilt local base (the sandbox image gaining a package) builds the task's image again
    instead of reusing one made from the old base."""
    total = hashlib.sha256(f"{organization}\0{digest}".encode())
    for base in dockerfile_bases(context):
        try:
            image_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            image_id = ""  # pulled at build time; its name is the key, as before
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not look up the base image {base}: {exc}") from exc
        total.update(f"\0{base}\0{image_id}".encode())
    return total.hexdigest()


def ensure_image(
    client: docker.DockerClient,
    *,
    context: Path,
    tag: str,
    timeout: float,
    steps: taskbuild.Limits,
    policy: taskpolicy.Policy,
    labels: dict[str, str] | None = None,
    force: bool = False,
) -> bool:
    """Build `tag` from the context unless the engine has it already (`force`: build it
    again, without the build cache); True when it was cached. Its RUN steps run in
    containers made as `steps` says (`taskbuild`: under gVisor, on the sandbox network),
    the rest by the engine's builder, all within `policy` (the bases it may name, no URL
    fetched outside the sandbox, the disk it may write); the image gets `labels`. BuildFailed with the log's tail,
    SandboxError when the engine fails."""
    try:
        if not force:
            client.images.get(tag)
            return True
    except docker.errors.ImageNotFound:
        pass
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not look up the task image: {exc}") from exc
    replaced = _image_id(client, tag) if force else ""
    labels = {**(labels or {}), LABEL_TASK_IMAGE: "1"}
    if policy.organization:
        labels[taskbuild.LABEL_ORGANIZATION] = policy.organization
    try:
        taskbuild.build(
            client,
            context=context.read_bytes(),
            tag=tag,
            limits=steps,
            labels=labels,
            timeout=timeout,
            policy=policy,
            nocache=force,
        )
    except taskbuild.StepFailed as exc:
        tail = ("".join(exc.log) + "\n" + str(exc)).strip()[-BUILD_LOG_TAIL:]
        raise BuildFailed(
            f"the task's image did not build: {str(exc)[:300]}\n--- build log ---\n{tail}"
        ) from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BuildFailed(
            f"the task's image did not build: the context is not a tar: {exc}"
        ) from None
    _drop_replaced(client, tag, replaced)
    return False


def task_images(
    client: docker.DockerClient, labels: dict[str, str]
) -> list[tuple[str, list[str], float]]:
    """The engine's task images that carry `labels` (a platform's own: its instance):
    (id, tags, when it was made as a Unix time)."""
    wanted = [LABEL_TASK_IMAGE, *(f"{key}={value}" for key, value in labels.items())]
    try:
        found = client.api.images(filters={"label": wanted})
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not list the task images: {exc}") from exc
    return [
        (i["Id"], [t for t in i.get("RepoTags") or [] if t != "<none>:<none>"], float(i["Created"]))
        for i in found
    ]


def remove_task_image(client: docker.DockerClient, image_id: str, tags: list[str]) -> bool:
    """The image's tags removed (an untagged one by its id), and the image with its
    untagged parents when the last one goes; False when a container (running or not)
    still uses it."""
    try:
        for reference in tags or [image_id]:
            client.api.remove_image(reference)
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # a container uses it
            return False
        raise SandboxError(f"could not remove the task image: {exc}") from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not remove the task image: {exc}") from exc
    return True


def _image_id(client: docker.DockerClient, tag: str) -> str:
    try:
        return client.api.inspect_image(tag)["Id"]
    except docker.errors.ImageNotFound:
        return ""
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not look up the task image: {exc}") from exc


def _drop_replaced(client: docker.DockerClient, tag: str, replaced: str) -> None:
    """The image a forced build took the tag from, removed (its layers with it) unless a
    task sandbox still runs it; it would stay on the engine's disk untagged for good."""
    if not replaced or replaced == _image_id(client, tag):
        return
    try:
        client.api.remove_image(replaced)
    except (docker.errors.DockerException, requests.RequestException):
        pass  # in use, or another tag holds it


def step_limits(spec: SandboxSpec, labels: dict[str, str]) -> taskbuild.Limits:
    """A build's RUN containers made as the task sandbox `spec` is (its runtime, network,
    limits and capabilities), with `labels`."""
    return taskbuild.Limits(
        network=spec.network,
        memory=_bytes(spec.memory),
        cpus=spec.cpus,
        pids=spec.pids,
        runtime=spec.runtime,
        cap_add=spec.cap_add,
        labels=labels,
    )


def _bytes(size: str) -> int:
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    text = str(size).strip().lower().removesuffix("b")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)


def image_workdir(client: docker.DockerClient, image: str) -> str:
    """The image's WORKDIR ("/" when it sets none)."""
    try:
        config = client.api.inspect_image(image).get("Config") or {}
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not inspect the task image: {exc}") from exc
    return config.get("WorkingDir") or "/"


def written_bytes(client: docker.DockerClient, container_ids: list[str]) -> dict[str, int]:
    """What each of these running containers wrote to its root filesystem: the size of its
    writable layer (Docker's SizeRw; not tmpfs mounts, not gVisor's in-memory /tmp). The
    engine walks each layer to answer: 10-30 ms for a few thousand files."""
    if not container_ids:
        return {}
    try:
        found = client.api.containers(size=True, filters={"id": list(container_ids)})
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not measure the task sandboxes' disks: {exc}") from exc
    return {item["Id"]: int(item.get("SizeRw") or 0) for item in found}
