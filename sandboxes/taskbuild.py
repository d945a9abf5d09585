"""Task images whose `RUN` steps run under gVisor (docs/task-sandboxes.md, "Builds and gVisor").

Docker's builder runs `RUN` steps under the engine's default runtime and has no runtime
option, so the Dockerfile is split at its `RUN` instructions: the other instructions (which
run no code of the task: FROM, COPY, ADD, ENV, ARG, WORKDIR, USER, LABEL, …) are built by the
engine's builder in pieces, each piece `FROM` the image so far; each `RUN` runs in a container
of the image so far, made like a task sandbox (the runtime, the network, the limits, the
capabilities, no-new-privileges), as the image's user in its workdir with its env and the
build args in scope, and `docker commit` (keeping the image's config) makes the next image.

What differs from `docker build`: `RUN` steps have no layer cache (the pieces do); gVisor
mounts its own in-memory /tmp in each container, so a `RUN` step's files in /tmp do not reach
the next step; `ONBUILD` (in the Dockerfile or its base image) and BuildKit-only `RUN` flags
are refused. The pieces are sent as `taskpolicy.vet` rewrote them (FROM, COPY and ADD from
the platform's own reading), within its policy. Pure docker SDK, no Django.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import time
from dataclasses import dataclass, field

import docker
import docker.auth
import docker.errors
import requests
import urllib3
from docker.utils import parse_repository_tag

from sandboxes import taskpolicy
from sandboxes.base import SandboxError
from sandboxes.dockerfile import (
    HEREDOC,
    Instruction,
    arg,
    escape_of,
    expand,
    json_list,
    leading_flags,
)
from sandboxes.taskcontext import PIECES_DIR, dockerfile_of, sent_context

LABEL_ORGANIZATION = "belvedir.organization"
STAGE_REPOSITORY = "belvedir-task-stage"
DEFAULT_SHELL = ["/bin/sh", "-c"]
DISK_CHECK_SECONDS = 2.0
# A read from the engine that waited out its timeout (urllib3's own error while a response
# streams: requests wraps only what happens before it).
_READ_TIMEOUT = (
    requests.exceptions.ReadTimeout,
    requests.exceptions.ConnectionError,
    urllib3.exceptions.ReadTimeoutError,
)


class StepFailed(SandboxError):
    """A step of the build failed; the message says which and why, `log` is the build's."""

    log: list[str] = []


@dataclass(frozen=True)
class Limits:
    """How every `RUN` container is made: as a task sandbox is."""

    network: str
    memory: int
    cpus: float
    pids: int
    runtime: str
    cap_add: tuple[str, ...] = ()
    # The RUN containers' labels: the run's, so that the reaper removes one whose build's
    # process died (a commit keeps them in the image; a container of it gets the platform's).
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class _Build:
    client: docker.DockerClient
    context: bytes
    limits: Limits
    labels: dict[str, str]
    deadline: float
    nocache: bool
    policy: taskpolicy.Policy
    escape: str = "\\"  # the Dockerfile's escape character: the pieces are read with it
    log: list[str] = field(default_factory=list)
    global_args: list[Instruction] = field(default_factory=list)
    global_values: dict[str, str] = field(default_factory=dict)
    stages: dict[str, str] = field(default_factory=dict)  # name or index -> a temporary tag
    temporary: list[str] = field(default_factory=list)
    token: str = field(default_factory=lambda: secrets.token_hex(6))
    # The stage's image so far once a RUN of this build committed: made by this build alone
    # (no build cache holds it), so removed when the build fails.
    own: str = ""
    pieces: int = 0
    written: int = 0  # what the build added to its bases so far: pieces and RUN steps
    stage_count: int = 0

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise StepFailed("the build took longer than its time limit")
        return left


@dataclass
class _Stage:
    from_line: str  # the FROM instruction of the first piece
    image: str = ""  # the image so far ("" before the first piece)
    args: list[Instruction] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    shell: list[str] = field(default_factory=lambda: list(DEFAULT_SHELL))
    pending: list[Instruction] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # its index, and its AS name


def build(
    client: docker.DockerClient,
    *,
    context: bytes,
    tag: str,
    limits: Limits,
    labels: dict[str, str],
    timeout: float,
    policy: taskpolicy.Policy,
    nocache: bool = False,
) -> None:
    """Build `context` (a tar of the task's environment directory, Dockerfile at its top) as
    `tag`, within `policy` (what it may name, fetch and write). StepFailed (the build's log
    tail in `log`) when a step fails or the policy refuses one, SandboxError when the engine
    fails."""
    job = _Build(client, context, limits, labels, time.monotonic() + timeout, nocache, policy)
    try:
        dockerfile = dockerfile_of(context)
        if dockerfile is None:
            raise StepFailed("the context has no Dockerfile at its top")
        try:  # the instructions as they may be sent: FROM, COPY and ADD rewritten
            instructions = taskpolicy.vet(dockerfile, sent_context(context), policy)
        except taskpolicy.Refused as exc:
            raise StepFailed(str(exc)) from None
        job.escape = escape_of(dockerfile)
        _steps(job, instructions, tag)
    except StepFailed as exc:
        exc.log = job.log
        _forget(job)
        raise
    except (
        docker.errors.DockerException,
        requests.RequestException,
        urllib3.exceptions.HTTPError,
    ) as exc:
        _forget(job)
        raise SandboxError(f"the engine failed during the build: {str(exc)[:300]}") from exc
    finally:
        for image in job.temporary:
            try:
                client.api.remove_image(image)
            except (docker.errors.DockerException, requests.RequestException):
                pass


def _forget(job: _Build) -> None:
    """A failed build's own images: the last one goes, and with it its untagged parents (the
    engine prunes them), down to the base or an image that another build uses."""
    if job.own:
        try:
            job.client.api.remove_image(job.own)
        except (docker.errors.DockerException, requests.RequestException):
            pass


def _steps(job: _Build, instructions: list[Instruction], tag: str) -> None:
    stage: _Stage | None = None
    for number, step in enumerate(instructions, 1):
        where = f"step {number} ({step.text[:80]})"
        if step.keyword == "ONBUILD":
            raise StepFailed(f"{where}: ONBUILD is not supported in task images")
        if stage is None and step.keyword == "ARG":
            job.global_args.append(step)
            name, default = arg(step.rest)
            job.global_values[name] = expand(default or "", job.global_values)
            continue
        if step.keyword == "FROM":
            if stage is not None:
                _end_stage(job, stage)
            stage = _from(job, step, where)
            continue
        if stage is None:
            raise StepFailed(f"{where}: {step.keyword} before FROM")
        if step.keyword == "ARG":
            name, default = arg(step.rest)
            stage.args.append(step)
            known = {**job.global_values, **stage.values}
            stage.values[name] = (
                expand(default, known) if default is not None else known.get(name, "")
            )
        elif step.keyword == "SHELL":
            stage.shell = json_list(step.rest) or []
            if not stage.shell:
                raise StepFailed(f'{where}: SHELL takes a JSON list, e.g. ["/bin/bash", "-c"]')
        elif step.keyword == "COPY":  # its --from (if any) named by this build's own images
            step = _copy_from(job, step, where)
        if step.heredocs and step.keyword != "RUN":
            raise StepFailed(f"{where}: heredocs are supported in RUN only, not in {step.keyword}")
        if step.keyword != "RUN":
            stage.pending.append(step)
            continue
        _piece(job, stage)
        _run(job, stage, step, where)
    if stage is None:
        raise StepFailed("the Dockerfile has no FROM")
    _piece(job, stage, final=True)
    repository, _, version = tag.rpartition(":")
    job.client.api.tag(stage.image, repository, version)


def _from(job: _Build, step: Instruction, where: str) -> _Stage:
    """A new stage. Its base must not carry ONBUILD triggers (the first piece's FROM would
    fire them under the engine's default runtime)."""
    words = step.rest.split()
    words = [w for w in words if not w.startswith("--platform")]
    base = expand(words[0], job.global_values) if words else ""
    if not base:
        raise StepFailed(f"{where}: FROM names no image")
    # Stage names are case-insensitive, as Docker reads them.
    alias = words[2].lower() if len(words) == 3 and words[1].upper() == "AS" else ""
    if base.lower() in job.stages:  # FROM an earlier stage
        base = job.stages[base.lower()]
    elif base != "scratch":
        if not job.policy.allows(base):  # vetted before the build; kept where it is used
            raise StepFailed(f"{where}: FROM {base}: not an allowed base image")
        try:
            config = _base_config(job, base)
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise StepFailed(
                f"{where}: the base image {base} is not on the engine and could not be pulled "
                f"({str(exc)[:200]})"
            ) from None
        if config.get("OnBuild"):
            raise StepFailed(f"{where}: the base image {base} has ONBUILD triggers")
    names = [str(job.stage_count), *([alias] if alias else [])]
    job.stage_count += 1
    return _Stage(from_line=f"FROM {base}", names=names)


def _base_config(job: _Build, image: str) -> dict:
    """The image's config; pulled first when the engine lacks it (one it holds is never
    refreshed), as the engine's builder does, within the build's time limit (the SDK's
    `pull` waits without one)."""
    api = job.client.api
    try:
        return api.inspect_image(image).get("Config") or {}
    except docker.errors.ImageNotFound:
        if not job.policy.pull:
            raise StepFailed(
                f"the base image {image} is not on the engine, and pulls are off "
                "(BELVEDIR_TASK_BASE_PULL)"
            ) from None
    repository, version = parse_repository_tag(image)
    registry, _ = docker.auth.resolve_repository_name(repository)
    header = docker.auth.get_config_header(api, registry)
    try:
        response = api._post(
            api._url("/images/create"),
            params={"fromImage": repository, "tag": version or "latest"},
            headers={"X-Registry-Auth": header} if header else {},
            stream=True,
            timeout=job.left(),
        )
        try:
            api._raise_for_status(response)
            for event in api._stream_helper(response, decode=True):
                if "error" in event:
                    raise docker.errors.DockerException(str(event["error"]))
                job.left()
        finally:
            response.close()
    except _READ_TIMEOUT:
        job.left()  # past the deadline: StepFailed saying so
        raise
    return api.inspect_image(image).get("Config") or {}


def _end_stage(job: _Build, stage: _Stage) -> None:
    _piece(job, stage, final=True)
    name = f"{STAGE_REPOSITORY}:{job.token}-{len(job.temporary)}"
    job.client.api.tag(stage.image, *name.split(":"))
    job.temporary.append(name)
    job.own = ""  # the tag goes at the end, success or not
    for key in stage.names:
        job.stages[key] = name


def _copy_from(job: _Build, step: Instruction, where: str) -> Instruction:
    """The COPY with each `--from` naming this build's own stage image, or an allowed base."""
    flags, rest = leading_flags(step.rest)
    swapped = []
    for flag in flags:
        if flag.startswith("--from="):
            source = flag.removeprefix("--from=")
            if source.lower() in job.stages:
                source = job.stages[source.lower()]
            elif not job.policy.allows(source):  # vetted before the build, kept here too
                raise StepFailed(f"{where}: COPY --from={source}: not an allowed base image")
            flag = f"--from={source}"
        swapped.append(flag)
    rest = " ".join([*swapped, rest])
    return Instruction(step.keyword, rest, f"{step.keyword} {rest}")


def _piece(job: _Build, stage: _Stage, *, final: bool = False) -> None:
    """Build what the stage holds since its last RUN (its FROM, COPY, ENV, …) on the image
    so far, with the engine's builder: no code of the task runs there."""
    if not stage.pending and stage.image and not final:
        return
    lines = [] if job.escape == "\\" else [f"# escape={job.escape}"]
    lines += [step.text for step in job.global_args]
    lines.append(f"FROM {stage.image}" if stage.image else stage.from_line)
    if stage.image:
        lines += [step.text for step in stage.args]
    elif job.policy.organization:
        # The stage's first layer is the organization's own: no build cache is shared with
        # another organization's build (every later piece builds on it or on a RUN's commit).
        lines.append(f'LABEL {LABEL_ORGANIZATION}="{job.policy.organization}"')
    lines += [step.text for step in stage.pending]
    stage.pending = []
    job.pieces += 1
    name = f"{PIECES_DIR}-{job.pieces}.Dockerfile"
    context = sent_context(job.context, (name, "\n".join(lines) + "\n"))
    image = ""
    error = ""
    try:
        events = job.client.api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            dockerfile=name,
            rm=True,
            forcerm=True,
            pull=False,
            nocache=job.nocache,
            network_mode="none",
            container_limits={"memory": job.limits.memory, "memswap": job.limits.memory},
            # The RUN containers' labels stay out of the image (a container of it gets its own).
            labels={**{key: "" for key in job.limits.labels}, **job.labels} if final else None,
            decode=True,
            timeout=job.left(),
            use_config_proxy=False,
        )
        for event in events:
            if "stream" in event:
                job.log.append(str(event["stream"]))
            if "error" in event:
                error = str(event["error"]).strip()
            if "aux" in event and "ID" in (event["aux"] or {}):
                image = event["aux"]["ID"]
            job.left()  # past the deadline: StepFailed (the read timeout is per read)
    except _READ_TIMEOUT:
        job.left()  # a read waited out the time left: StepFailed saying so
        raise
    if error or not image:
        raise StepFailed(error or "the engine's builder gave no image")
    if job.own and job.own == stage.image:
        job.own = image
    _count_piece(job, stage, image)
    stage.image = image


def _count_piece(job: _Build, stage: _Stage, image: str) -> None:
    """What the piece added to the stage's image (what its COPY steps copied: ADD is sent
    as COPY) counts against the build's disk limit; past it the piece's image goes and the
    build stops."""
    if not job.policy.disk:
        return
    api = job.client.api
    before = stage.image or stage.from_line.removeprefix("FROM ")
    base_size = 0 if before == "scratch" else int(api.inspect_image(before).get("Size") or 0)
    job.written += max(int(api.inspect_image(image).get("Size") or 0) - base_size, 0)
    if job.written > job.policy.disk:
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            api.remove_image(image)  # and its untagged parents, down to the base
        raise StepFailed(f"the build wrote {taskpolicy.disk_message(job.policy.disk)}")


def _run(job: _Build, stage: _Stage, step: Instruction, where: str) -> None:
    """The RUN step in a container of the image so far, under the limits; committed."""
    if step.rest.startswith("--"):
        raise StepFailed(f"{where}: RUN flags (BuildKit's --mount, --network, …) are not supported")
    api = job.client.api
    config = api.inspect_image(stage.image).get("Config") or {}
    env_names = {item.partition("=")[0] for item in config.get("Env") or []}
    args = [f"{k}={v}" for k, v in stage.values.items() if k not in env_names]
    command = json_list(step.rest) or _shell_command(step, config.get("Shell") or stage.shell)
    # The build args reach the command through `env`, not the container's config: a commit
    # keeps the container's env, and build args must not stay in the image.
    command = ["env", *args, *command] if args else command
    job.log.append(f"Step {where}: under {job.limits.runtime or 'the default runtime'}\n")
    container = api.create_container(
        stage.image,
        command=command,
        entrypoint=[],
        user=config.get("User") or "",
        labels=job.limits.labels,
        name=f"belvedir-build-{job.token}-{secrets.token_hex(3)}",
        working_dir=config.get("WorkingDir") or None,
        host_config=api.create_host_config(
            runtime=job.limits.runtime or None,
            network_mode=job.limits.network,
            mem_limit=job.limits.memory,
            memswap_limit=job.limits.memory,
            nano_cpus=int(job.limits.cpus * 1_000_000_000),
            pids_limit=job.limits.pids,
            cap_drop=["ALL"],
            cap_add=list(job.limits.cap_add),
            security_opt=["no-new-privileges"],
            init=True,
        ),
    )["Id"]
    try:
        try:
            api.start(container)
        except docker.errors.APIError as exc:  # e.g. its USER is not in the image's passwd
            reason = exc.explanation or str(exc)
            raise StepFailed(f"{where}: the step could not start: {str(reason)[:300]}") from None
        code = _wait(job, container, where)
        output = api.logs(container, stdout=True, stderr=True, tail=200)
        job.log.append(output.decode(errors="replace"))
        if code != 0:
            raise StepFailed(f"{where}: the command returned a non-zero code: {code}")
        job.written += _check_disk(job, container, where)
        kept = {key: config.get(key) for key in ("Cmd", "Entrypoint", "Env", "User", "WorkingDir")}
        kept["Labels"] = config.get("Labels") or {}
        image = api.commit(container, conf={**config, **kept})["Id"]
        job.own = image
    finally:
        api.remove_container(container, force=True, v=True)
    stage.image = image


def _wait(job: _Build, container: str, where: str) -> int:
    """The step's exit code; StepFailed past the build's deadline or its disk limit."""
    api = job.client.api
    while True:
        left = job.deadline - time.monotonic()
        if left <= 0:
            raise StepFailed(f"{where}: the build took longer than its time limit")
        try:
            return api.wait(container, timeout=min(left, DISK_CHECK_SECONDS)).get("StatusCode", -1)
        except _READ_TIMEOUT:
            pass
        api.inspect_container(container)  # the engine still answers (else SandboxError)
        _check_disk(job, container, where)


def _check_disk(job: _Build, container: str, where: str) -> int:
    """What the step wrote so far (its container's writable layer); StepFailed when the
    build together wrote more than the disk limit."""
    if not job.policy.disk:
        return 0
    found = job.client.api.containers(all=True, size=True, filters={"id": container})
    used = int((found[0].get("SizeRw") if found else 0) or 0)
    if job.written + used > job.policy.disk:
        raise StepFailed(f"{where}: the build wrote {taskpolicy.disk_message(job.policy.disk)}")
    return used


def _shell_command(step: Instruction, shell: list[str]) -> list[str]:
    """A shell-form RUN's command, its heredocs as BuildKit runs them: `RUN <<EOF` alone runs
    the body (a script with a `#!` line: as that script), `RUN cmd <<EOF` gives the shell the
    command with its heredocs."""
    if not step.heredocs:
        return [*shell, step.rest]
    name, body = step.heredocs[0]
    if len(step.heredocs) == 1 and HEREDOC.fullmatch(step.rest):
        if not body.startswith("#!"):
            return [*shell, body]
        script = 'f=$(mktemp) && printf %s "$1" > "$f" && chmod +x "$f" && "$f"; c=$?; rm -f "$f"; exit $c'
        return ["/bin/sh", "-c", script, "heredoc", body]
    full = step.rest + "".join(f"\n{body}{name}" for name, body in step.heredocs)
    return [*shell, full]
