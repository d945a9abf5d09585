"""Environment writes: create, update (a new version when anything changes), delete, and a
harness backed by an environment. Pages, API, CLI and admin call these; the task rules are
harnesses.tasks_format's."""

from django.db import IntegrityError, transaction
from django.utils import timezone

from belvedir.errors import Invalid
from belvedir.models import Project
from harnesses import policy, services, tasks_format
from harnesses.catalog import Preset, preset_get
from harnesses.models import Environment, EnvironmentVersion, Harness

DESCRIPTION_MAX_CHARS = 10_000
NAME_MAX_CHARS = Environment._meta.get_field("name").max_length
# Catalog cards an environment can back: those that take a task list (runners, scaffolds).
ONE_SANDBOX_KINDS = ("judge", "rubric")


def environment_tasks(*, environment: Environment, number: int | None = None) -> list[dict]:
    """The tasks of the environment's current version (or of version `number`)."""
    version = environment.versions.filter(number=number or environment.version).first()
    return list(version.tasks) if version else []


def _clean_tasks(tasks) -> list[dict]:
    """Tasks given as a list (the API) or as a tasks file's text (an import, the editor)."""
    if isinstance(tasks, str):
        return tasks_format.parse_tasks(tasks)
    return tasks_format.validate_tasks(tasks)


def clean_description(description) -> str:
    if description is not None and not isinstance(description, str):
        raise Invalid("description must be text.", field="description")
    description = (description or "").strip()
    if len(description) > DESCRIPTION_MAX_CHARS:
        raise Invalid(
            f"description must be at most {DESCRIPTION_MAX_CHARS:,} characters.",
            field="description",
        )
    return description


def _check_name_free(project: Project, name: str, exclude_id: str | None = None) -> None:
    taken = Environment.objects.filter(project=project, name=name)
    if exclude_id:
        taken = taken.exclude(pk=exclude_id)
    if taken.exists():
        raise _taken(name)


def _taken(name: str) -> Invalid:
    return Invalid(f"An environment named {name!r} already exists in this project.", field="name")


def _save(environment: Environment, version: EnvironmentVersion) -> Environment:
    try:
        with transaction.atomic():
            environment.save()
            version.environment = environment
            version.save()
    except IntegrityError:  # a concurrent save took the name
        raise _taken(environment.name) from None
    return environment


@transaction.atomic
def environment_create(
    *,
    project: Project,
    name: str,
    tasks: list | str,
    description: str = "",
    created_by=None,
) -> Environment:
    """A new environment at version 1. `tasks`: a list of task objects or a tasks file's text."""
    name = policy.validate_name(name, max_chars=NAME_MAX_CHARS)
    description = clean_description(description)
    clean = _clean_tasks(tasks)
    _check_name_free(project, name)
    now = timezone.now()
    environment = Environment(
        project=project,
        name=name,
        description=description,
        version=1,
        task_count=len(clean),
        created_by=created_by,
        created_at=now,
        updated_at=now,
    )
    version = EnvironmentVersion(
        number=1,
        name=name,
        description=description,
        tasks=clean,
        created_by=created_by,
        created_at=now,
    )
    return _save(environment, version)


@transaction.atomic
def environment_update(
    *,
    environment: Environment,
    updated_by=None,
    name: str | None = None,
    description: str | None = None,
    tasks: list | str | None = None,
) -> Environment:
    """Change the given fields (None: keep). A change makes a new version; no change, none."""
    environment = Environment.objects.select_for_update().get(pk=environment.pk)
    current = environment_tasks(environment=environment)
    new_name = (
        environment.name if name is None else policy.validate_name(name, max_chars=NAME_MAX_CHARS)
    )
    new_description = (
        environment.description if description is None else clean_description(description)
    )
    new_tasks = current if tasks is None else _clean_tasks(tasks)
    if (new_name, new_description, new_tasks) == (
        environment.name,
        environment.description,
        current,
    ):
        return environment
    _check_name_free(environment.project, new_name, exclude_id=environment.pk)
    now = timezone.now()
    environment.name = new_name
    environment.description = new_description
    environment.version += 1
    environment.task_count = len(new_tasks)
    environment.updated_at = now
    version = EnvironmentVersion(
        number=environment.version,
        name=new_name,
        description=new_description,
        tasks=new_tasks,
        created_by=updated_by,
        created_at=now,
    )
    return _save(environment, version)


@transaction.atomic
def environment_delete(*, environment: Environment) -> None:
    """Delete the environment and its versions; harnesses made from it keep their Tasks."""
    environment.delete()


def backing_preset(slug: str) -> Preset:
    """The catalog card a harness made from an environment uses; refuses the others by name."""
    preset = preset_get((slug or "").strip())
    if preset is None:
        raise Invalid(f"There is no catalog card {slug!r}.", field="preset")
    if not preset.available:
        raise Invalid(
            f"The {preset.name} card is not yet available, so it cannot back an environment.",
            field="preset",
        )
    if not preset.tasks:
        raise Invalid(
            f"The {preset.name} card brings its own tasks, so it cannot back an environment: "
            "pick Belvedir Runner or Belvedir Runner on Harbor.",
            field="preset",
        )
    return preset


def _free_harness_name(project: Project, name: str) -> str:
    name = name[:110]
    taken = set(
        Harness.objects.filter(project=project, name__startswith=name).values_list(
            "name", flat=True
        )
    )
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name} ({n})"
    return candidate


@transaction.atomic
def environment_harness_create(
    *, environment: Environment, preset: str, created_by=None, name: str | None = None
) -> Harness:
    """A harness from the card `preset`, its Tasks field holding the environment's tasks.

    The one-sandbox Belvedir Runner grades judge and rubric tasks only: an environment with
    `code` or `state_diff` tasks is refused for it, naming them (they run under Harbor only).
    """
    card = backing_preset(preset)
    tasks = environment_tasks(environment=environment)
    if card.slug == "runner":
        harbor_only = [t["id"] for t in tasks if t["verifier"]["kind"] not in ONE_SANDBOX_KINDS]
        if harbor_only:
            shown = ", ".join(harbor_only[:10]) + (" …" if len(harbor_only) > 10 else "")
            raise Invalid(
                f"The Belvedir Runner runs judge and rubric tasks only; code and state_diff "
                f"tasks run under Harbor only ({shown}). Pick Belvedir Runner on Harbor.",
                field="preset",
            )
    name = name or _free_harness_name(environment.project, f"{environment.name} · {card.name}")
    # The Tasks field holds the version's tasks; the Harbor driver runs a Harbor card's as the
    # platform's Harbor export of them (the environments' export code), as the Runner does.
    harness = services.harness_create(
        project=environment.project,
        created_by=created_by,
        preset=card.slug,
        name=name,
        tasks=tasks_format.dumps(tasks),
    )
    harness.environment, harness.environment_version = environment, environment.version
    harness.save(update_fields=["environment", "environment_version"])
    return harness
