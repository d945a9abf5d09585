"""Harness writes. Every rule lives here; pages, API, CLI and admin call these."""

from django.db import IntegrityError, transaction
from django.utils import timezone

from belvedir.errors import Invalid
from belvedir.models import Project
from harnesses import env_secrets, managed, policy
from harnesses.catalog import preset_get
from harnesses.models import DEFAULT_GPU_TYPE, GPU_TYPES, Compute, Harness

NAME_MAX_CHARS = Harness._meta.get_field("name").max_length
COMMAND_MAX_CHARS = 10_000

FIELDS = [
    "name",
    "repo_url",
    "ref",
    "install_command",
    "run_command",
    "env",
    "compute",
    "gpu_type",
    "tasks",
    "preset",
]


def _check_preset(slug: str) -> str:
    slug = (slug or "").strip()
    if not slug:
        return ""
    preset = preset_get(slug)
    if preset is None:
        raise Invalid(f"There is no catalog card {slug!r}.", field="preset")
    if not preset.available:
        raise Invalid(f"The {preset.name} card is not yet available.", field="preset")
    return slug


def harness_defaults_from_preset(slug: str) -> dict:
    """The fields a catalog card prefills; refuses unknown and unavailable cards."""
    slug = _check_preset(slug)
    preset = preset_get(slug)
    return {
        "name": preset.name,
        "repo_url": preset.repo_url,
        "ref": preset.ref,
        "install_command": preset.install_command,
        "run_command": preset.run_command,
        "env": preset.prefilled_env(),
        "compute": preset.compute,
        "gpu_type": preset.gpu_type,
        "tasks": preset.tasks,
        "preset": slug,
    }


def _clean(
    data: dict, *, organization=None, current_preset: str = "", stored_secrets: str = ""
) -> dict:
    """Validated fields. `current_preset`, the card a harness already came from, is kept
    without a check (a card may have been withdrawn since). Secret env values move to
    `env_secrets_encrypted`; a masked one keeps its value from `stored_secrets`.
    `organization`: the harness's, whose credits a managed Harbor harness needs."""
    clean: dict = {}
    clean["name"] = policy.validate_name(data.get("name"), max_chars=NAME_MAX_CHARS)
    clean["repo_url"] = policy.validate_repo_url(data.get("repo_url"))
    clean["ref"] = policy.validate_ref(data.get("ref"))
    for command in ("install_command", "run_command"):
        value = data.get(command) or ""
        if not isinstance(value, str):
            raise Invalid(f"{command} must be text.", field=command)
        if len(value) > COMMAND_MAX_CHARS:
            raise Invalid(
                f"{command} must be at most {COMMAND_MAX_CHARS:,} characters.", field=command
            )
        clean[command] = value.strip()
    if not clean["run_command"]:
        raise Invalid("run_command is required.", field="run_command")
    clean["env"], clean["env_secrets_encrypted"] = env_secrets.env_split(
        policy.validate_env(data.get("env")), stored_token=stored_secrets
    )
    compute = (data.get("compute") or Compute.CPU).lower()
    if compute not in Compute.values:
        raise Invalid("compute must be cpu or gpu.", field="compute")
    clean["compute"] = compute
    gpu_type = (data.get("gpu_type") or "").strip()
    if compute == Compute.GPU:
        gpu_type = gpu_type or DEFAULT_GPU_TYPE
        if gpu_type not in GPU_TYPES:
            raise Invalid(f"gpu_type must be one of {', '.join(GPU_TYPES)}.", field="gpu_type")
    else:
        gpu_type = ""
    clean["gpu_type"] = gpu_type
    clean["tasks"] = policy.validate_tasks(data.get("tasks"))
    preset = (data.get("preset") or "").strip()
    clean["preset"] = preset if preset and preset == current_preset else _check_preset(preset)
    managed.harbor_tasks_refusal(
        repo_url=clean["repo_url"],
        preset=clean["preset"],
        env=clean["env"],
        tasks=clean["tasks"],
    )
    managed.managed_refusal(
        repo_url=clean["repo_url"],
        install_command=clean["install_command"],
        run_command=clean["run_command"],
        env=env_secrets.env_plain(clean["env"], clean["env_secrets_encrypted"]),
        compute=clean["compute"],
        preset=clean["preset"],
        organization=organization,
        tasks=clean["tasks"],
    )
    return clean


def _check_name_free(project: Project, name: str, exclude_id: str | None = None) -> None:
    taken = Harness.objects.filter(project=project, name=name)
    if exclude_id:
        taken = taken.exclude(pk=exclude_id)
    if taken.exists():
        raise Invalid(f"A harness named {name!r} already exists in this project.", field="name")


def harness_validate(
    *,
    project: Project | None = None,
    harness: Harness | None = None,
    name: str | None = None,
    repo_url: str | None = None,
    ref: str | None = None,
    install_command: str | None = None,
    run_command: str | None = None,
    env: dict[str, str] | None = None,
    compute: str | None = None,
    gpu_type: str | None = None,
    tasks: str | None = None,
    preset: str | None = None,
) -> dict:
    """The cleaned fields, or a DomainError naming the field (used by the admin).
    `harness`: the one being edited, whose saved secrets a masked env value keeps. The
    managed workspace's credits are checked for `project`'s organization (else `harness`'s)."""
    owner = project if project is not None else harness.project if harness is not None else None
    clean = _clean(
        _given(
            name=name,
            repo_url=repo_url,
            ref=ref,
            install_command=install_command,
            run_command=run_command,
            env=env,
            compute=compute,
            gpu_type=gpu_type,
            tasks=tasks,
            preset=preset,
        ),
        organization=owner.organization if owner is not None else None,
        stored_secrets=harness.env_secrets_encrypted if harness is not None else "",
    )
    if project is not None:
        _check_name_free(project, clean["name"], exclude_id=harness.pk if harness else None)
    return clean


def harness_values(*, harness: Harness) -> dict:
    """The harness's fields as pages and the API show them: secret env values masked."""
    values = {f: getattr(harness, f) for f in FIELDS}
    values["env"] = env_secrets.env_masked(harness.env or {}, harness.env_secrets_encrypted)
    return values


def _given(**fields) -> dict:
    """The fields a caller gave: None means not given."""
    return {field: value for field, value in fields.items() if value is not None}


def _save(harness: Harness) -> Harness:
    try:
        with transaction.atomic():
            harness.save()
    except IntegrityError:  # a concurrent save took the name
        raise Invalid(
            f"A harness named {harness.name!r} already exists in this project.", field="name"
        ) from None
    return harness


@transaction.atomic
def harness_create(
    *,
    project: Project,
    created_by=None,
    name: str | None = None,
    repo_url: str | None = None,
    ref: str | None = None,
    install_command: str | None = None,
    run_command: str | None = None,
    env: dict[str, str] | None = None,
    compute: str | None = None,
    gpu_type: str | None = None,
    tasks: str | None = None,
    preset: str | None = None,
) -> Harness:
    """Create a harness; with a `preset`, the card's fields fill whatever is not given (None).

    A field that is given, even blank, is kept as given: the New Harness form sends every
    field, and a field the user cleared stays cleared.
    """
    given = _given(
        name=name,
        repo_url=repo_url,
        ref=ref,
        install_command=install_command,
        run_command=run_command,
        env=env,
        compute=compute,
        gpu_type=gpu_type,
        tasks=tasks,
        preset=preset,
    )
    if preset:
        given = {**harness_defaults_from_preset(preset), **given}
    clean = _clean(given, organization=project.organization)
    _check_name_free(project, clean["name"])
    return _save(Harness(project=project, created_by=created_by, **clean))


@transaction.atomic
def harness_update(
    *,
    harness: Harness,
    name: str | None = None,
    repo_url: str | None = None,
    ref: str | None = None,
    install_command: str | None = None,
    run_command: str | None = None,
    env: dict[str, str] | None = None,
    compute: str | None = None,
    gpu_type: str | None = None,
    tasks: str | None = None,
    preset: str | None = None,
) -> Harness:
    """Update; fields not given (None) keep their value."""
    current = harness_values(harness=harness)
    given = _given(
        name=name,
        repo_url=repo_url,
        ref=ref,
        install_command=install_command,
        run_command=run_command,
        env=env,
        compute=compute,
        gpu_type=gpu_type,
        tasks=tasks,
        preset=preset,
    )
    clean = _clean(
        {**current, **given},
        organization=harness.project.organization,
        current_preset=harness.preset,
        stored_secrets=harness.env_secrets_encrypted,
    )
    _check_name_free(harness.project, clean["name"], exclude_id=harness.pk)
    for field, value in clean.items():
        setattr(harness, field, value)
    harness.updated_at = timezone.now()
    return _save(harness)


@transaction.atomic
def harness_delete(*, harness: Harness) -> None:
    harness.delete()
