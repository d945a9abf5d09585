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
are refused. Pure docker SDK, no Django.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import secrets
import tarfile
import time
from dataclasses import dataclass, field

import docker
import docker.auth
import docker.errors
import requests
from docker.utils import parse_repository_tag
from docker.utils.build import PatternMatcher

from runs.sandbox.base import SandboxError

PIECES_DIR = ".belvedir-build"
STAGE_REPOSITORY = "belvedir-task-stage"
DEFAULT_SHELL = ["/bin/sh", "-c"]
DISK_CHECK_SECONDS = 2.0
_VAR = re.compile(r"\\\$|\$(?:\{(\w+)(?::([-+])([^}]*))?\}|(\w+))")


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
    # What the RUN steps together may write to the image, in bytes (0: no limit); checked
    # every DISK_CHECK_SECONDS while a step runs, as a task sandbox's disk is.
    disk: int = 0
    # The RUN containers' labels: the run's, so that the reaper removes one whose build's
    # process died (a commit keeps them in the image; a container of it gets the platform's).
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    rest: str
    text: str  # as written, continuations joined
    heredocs: tuple[tuple[str, str], ...] = ()  # (name, body) of each `<<NAME` of a RUN


# A heredoc's opening word (BuildKit's, for RUN, COPY and ADD): `<<NAME`, `<<-NAME` (tabs
# stripped), `<<"NAME"` / `<<'NAME'`; not a here-string (`<<<`) nor a shift (`1<<2`).
_HEREDOC = re.compile(r"(?:^|(?<=\s))\d*<<(-?)([\"']?)([A-Za-z_][\w.-]*)\2(?=\s|$)")


def parse(dockerfile: str) -> list[Instruction]:
    """The Dockerfile's instructions as Docker reads them: parser directives, comments and
    blank lines dropped; continuation lines joined (the escape character and the line break
    removed, nothing added; comment and empty lines inside skipped); the bodies of a RUN's
    heredocs collected."""
    lines = dockerfile.splitlines()
    escape, body = "\\", 0
    while body < len(lines):
        match = re.match(r"^#\s*(\w+)\s*=\s*(\S+)\s*$", lines[body])
        if not match:
            break
        if match.group(1).lower() == "escape":
            escape = match.group(2)
        body += 1
    continued = re.compile(re.escape(escape) + r"[ \t]*$")
    found: list[Instruction] = []
    rows = iter(lines[body:])
    for line in rows:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        while continued.search(text):
            text = continued.sub("", text)
            following = next(rows, None)
            while following is not None and (
                not following.strip() or following.lstrip().startswith("#")
            ):
                following = next(rows, None)
            if following is None:
                break
            text += following.rstrip("\r\n")
        text = text.strip()
        keyword, _, rest = text.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        heredocs: list[tuple[str, str]] = []
        if keyword in ("RUN", "COPY", "ADD"):
            for match in _HEREDOC.finditer(rest):
                strip_tabs, name = match.group(1) == "-", match.group(3)
                content: list[str] = []
                for row in rows:
                    row = row.lstrip("\t") if strip_tabs else row
                    if row == name:
                        break
                    content.append(row + "\n")
                heredocs.append((name, "".join(content)))
        found.append(Instruction(keyword, rest, text, tuple(heredocs)))
    return found


def expand(text: str, values: dict[str, str]) -> str:
    """`$name`, `${name}`, `${name:-word}` and `${name:+word}` as a Dockerfile means them."""

    def one(match: re.Match) -> str:
        if match.group(0) == "\\$":
            return "$"
        value = values.get(match.group(1) or match.group(4) or "", "")
        if match.group(2) == "-":
            return value or match.group(3)
        if match.group(2) == "+":
            return match.group(3) if value else ""
        return value

    return _VAR.sub(one, text)


def _arg(rest: str) -> tuple[str, str | None]:
    name, equals, default = rest.partition("=")
    return name.strip(), (default.strip().strip('"') if equals else None)


@dataclass
class _Build:
    client: docker.DockerClient
    context: bytes
    limits: Limits
    labels: dict[str, str]
    deadline: float
    nocache: bool
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
    written: int = 0  # what the committed RUN steps wrote
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
    nocache: bool = False,
) -> None:
    """Build `context` (a tar of the task's environment directory, Dockerfile at its top) as
    `tag`. StepFailed (the build's log tail in `log`) when a step fails, SandboxError when the
    engine does."""
    job = _Build(client, context, limits, labels, time.monotonic() + timeout, nocache)
    try:
        _steps(job, parse(_dockerfile(context)), tag)
    except StepFailed as exc:
        exc.log = job.log
        _forget(job)
        raise
    except (docker.errors.DockerException, requests.RequestException) as exc:
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
            name, default = _arg(step.rest)
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
            name, default = _arg(step.rest)
            stage.args.append(step)
            known = {**job.global_values, **stage.values}
            stage.values[name] = (
                expand(default, known) if default is not None else known.get(name, "")
            )
        elif step.keyword == "SHELL":
            stage.shell = _json_list(step.rest) or []
            if not stage.shell:
                raise StepFailed(f'{where}: SHELL takes a JSON list, e.g. ["/bin/bash", "-c"]')
        elif step.keyword == "COPY" and "--from=" in step.rest:
            step = _copy_from(job, step)
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
        pass
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
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
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


def _copy_from(job: _Build, step: Instruction) -> Instruction:
    def swap(match: re.Match) -> str:
        return f"--from={job.stages.get(match.group(1).lower()) or match.group(1)}"

    rest = re.sub(r"--from=(\S+)", swap, step.rest)
    return Instruction(step.keyword, rest, f"{step.keyword} {rest}")


def _piece(job: _Build, stage: _Stage, *, final: bool = False) -> None:
    """Build what the stage holds since its last RUN (its FROM, COPY, ENV, …) on the image
    so far, with the engine's builder: no code of the task runs there."""
    if not stage.pending and stage.image and not final:
        return
    lines = [step.text for step in job.global_args]
    lines.append(f"FROM {stage.image}" if stage.image else stage.from_line)
    if stage.image:
        lines += [step.text for step in stage.args]
    lines += [step.text for step in stage.pending]
    stage.pending = []
    job.pieces += 1
    name = f"{PIECES_DIR}-{job.pieces}.Dockerfile"
    context = sent_context(job.context, (name, "\n".join(lines) + "\n"))
    image = ""
    error = ""
    for event in job.client.api.build(
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
    ):
        if "stream" in event:
            job.log.append(str(event["stream"]))
        if "error" in event:
            error = str(event["error"]).strip()
        if "aux" in event and "ID" in (event["aux"] or {}):
            image = event["aux"]["ID"]
    if error or not image:
        raise StepFailed(error or "the engine's builder gave no image")
    if job.own and job.own == stage.image:
        job.own = image
    stage.image = image


def _run(job: _Build, stage: _Stage, step: Instruction, where: str) -> None:
    """The RUN step in a container of the image so far, under the limits; committed."""
    if step.rest.startswith("--"):
        raise StepFailed(f"{where}: RUN flags (BuildKit's --mount, --network, …) are not supported")
    api = job.client.api
    config = api.inspect_image(stage.image).get("Config") or {}
    env_names = {item.partition("=")[0] for item in config.get("Env") or []}
    args = [f"{k}={v}" for k, v in stage.values.items() if k not in env_names]
    command = _json_list(step.rest) or _shell_command(step, config.get("Shell") or stage.shell)
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
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            pass
        api.inspect_container(container)  # the engine still answers (else SandboxError)
        _check_disk(job, container, where)


def _check_disk(job: _Build, container: str, where: str) -> int:
    """What the step wrote so far (its container's writable layer); StepFailed when the
    build's steps together wrote more than the disk limit."""
    if not job.limits.disk:
        return 0
    found = job.client.api.containers(all=True, size=True, filters={"id": container})
    used = int((found[0].get("SizeRw") if found else 0) or 0)
    if job.written + used > job.limits.disk:
        limit = job.limits.disk // 2**20
        raise StepFailed(f"{where}: the build's RUN steps wrote more than {limit} MiB")
    return used


def _shell_command(step: Instruction, shell: list[str]) -> list[str]:
    """A shell-form RUN's command, its heredocs as BuildKit runs them: `RUN <<EOF` alone runs
    the body (a script with a `#!` line: as that script), `RUN cmd <<EOF` gives the shell the
    command with its heredocs."""
    if not step.heredocs:
        return [*shell, step.rest]
    name, body = step.heredocs[0]
    if len(step.heredocs) == 1 and _HEREDOC.fullmatch(step.rest):
        if not body.startswith("#!"):
            return [*shell, body]
        script = 'f=$(mktemp) && printf %s "$1" > "$f" && chmod +x "$f" && "$f"; c=$?; rm -f "$f"; exit $c'
        return ["/bin/sh", "-c", script, "heredoc", body]
    full = step.rest + "".join(f"\n{body}{name}" for name, body in step.heredocs)
    return [*shell, full]


def _json_list(text: str) -> list[str] | None:
    """An instruction's exec form (a JSON list of strings); None for the shell form."""
    try:
        value = json.loads(text) if text.startswith("[") else None
    except ValueError:
        return None
    ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
    return value if ok else None


def _dockerfile(context: bytes) -> str:
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as tar:
        for member in tar:
            if member.name.removeprefix("./") == "Dockerfile" and member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                return data.read().decode("utf-8", errors="replace")
    raise StepFailed("the context has no Dockerfile at its top")


def sent_context(context: bytes, piece: tuple[str, str] | None = None) -> bytes:
    """The context (a tar, gzip or not) as the docker CLI sends it: less what the task's
    .dockerignore excludes (the engine itself drops only the Dockerfile it builds and the
    .dockerignore). `piece` (name, text): one more Dockerfile at its top, which the
    .dockerignore sent keeps out of the image (appended to the task's own, or made)."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(context), mode="r:*") as source,
        tarfile.open(fileobj=out, mode="w") as tar,
    ):
        members = source.getmembers()
        ignore = b""
        for member in members:
            if member.name.removeprefix("./") == ".dockerignore" and member.isfile():
                data = source.extractfile(member)
                assert data is not None
                ignore = data.read()
        excluded = PatternMatcher(_ignore_patterns(ignore.decode("utf-8", "replace")))
        for member in members:
            clean = member.name.removeprefix("./").strip("/")
            if clean == ".dockerignore" or (piece and clean.startswith(PIECES_DIR)):
                continue
            built = piece is None and clean == "Dockerfile"  # the engine drops it if excluded
            if clean and clean != "." and not built and excluded.matches(clean):
                continue
            tar.addfile(member, source.extractfile(member) if member.isfile() else None)
        added = [(".dockerignore", ignore)] if ignore else []
        if piece is not None:
            made = not ignore
            ignore += f"\n{PIECES_DIR}*\n".encode() + (b".dockerignore\n" if made else b"")
            added = [(".dockerignore", ignore), (piece[0], piece[1].encode())]
        for path, data in added:
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _ignore_patterns(text: str) -> list[str]:
    """A .dockerignore's patterns as the docker CLI reads them (comments and blank lines
    dropped, each cleaned and made relative)."""
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = posixpath.normpath(line.removeprefix("!").strip()).lstrip("/")
        if line and line != ".":
            patterns.append(("!" if negated else "") + line)
    return patterns
