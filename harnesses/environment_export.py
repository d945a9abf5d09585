"""An environment as a Harbor dataset (harnesses.harbor_export): its tasks, the base image from
the settings, and the environment's id, name and version in every task.toml."""

import re

from django.conf import settings
from django.http import StreamingHttpResponse

from belvedir.errors import Invalid
from harnesses import tasks_format
from harnesses.environments import environment_tasks
from harnesses.harbor_export import ExportError, ExportFile, ExportOptions, export_files, zip_stream
from harnesses.models import Environment

TASKS_TOTAL_HEADER = "X-Belvedir-Tasks-Total"


def export_limit(raw) -> int | None:
    """`limit` as given to the API or a form: blank for every task, else a whole number >= 1."""
    if raw in (None, ""):
        return None
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        raise Invalid("limit must be a whole number of tasks.", field="limit") from None
    if limit < 1:
        raise Invalid("limit must be at least 1.", field="limit")
    return limit


def tasks_export_files(
    tasks: list[dict], *, limit: int | None = None, metadata: dict | None = None
) -> list[ExportFile]:
    """The Harbor export of `tasks` (validated task objects; their first `limit`) with the
    platform's options: an environment's, and a Harbor harness's Tasks field at a run."""
    options = ExportOptions(
        base_image=settings.BELVEDIR_EXPORT_BASE_IMAGE,
        base_agents=tuple(settings.BELVEDIR_EXPORT_BASE_AGENTS),
        # The verifier's judge where the run (or your shell) sets no JUDGE_MODEL.
        judge_model=settings.BELVEDIR_DEFAULT_JUDGE_MODEL,
        limit=limit,
        metadata=metadata or {},
    )
    try:
        return export_files(tasks, options)
    except ExportError as exc:
        raise Invalid(str(exc)) from None


def environment_export_files(
    *, environment: Environment, limit: int | None = None
) -> list[ExportFile]:
    """The Harbor export of the environment's current version (its first `limit` tasks)."""
    metadata = {
        "environment": environment.pk,
        "environment_name": environment.name,
        "environment_version": environment.version,
    }
    return tasks_export_files(
        environment_tasks(environment=environment), limit=limit, metadata=metadata
    )


def export_root(environment: Environment) -> str:
    """The export's folder name: the environment's name as a file name, and its version."""
    return _root(environment.name, environment.pk, f"v{environment.version}")


def _root(name: str, fallback: str, suffix: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or fallback
    return f"{name[:60]}-{suffix}"


def _zip_response(files: list[ExportFile], *, root: str, total: int) -> StreamingHttpResponse:
    response = StreamingHttpResponse(zip_stream(files, root=root), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{root}.zip"'
    # Every task, however many `limit` let in (a driver's "ran N of M").
    response[TASKS_TOTAL_HEADER] = str(total)
    return response


def environment_export_response(*, environment: Environment, limit) -> StreamingHttpResponse:
    """The zip download the API and the environment page answer with; `limit` as given
    (blank: every task)."""
    files = environment_export_files(environment=environment, limit=export_limit(limit))
    total = len(environment_tasks(environment=environment))
    return _zip_response(files, root=export_root(environment), total=total)


def tasks_export_response(
    *, tasks_text: str, name: str, key: str, limit, metadata: dict
) -> StreamingHttpResponse:
    """A Tasks field (a tasks file's text) as the same Harbor export, a zip under
    `<name>-<key>/`; Invalid (field `tasks`) when the text is not a valid task list."""
    tasks = tasks_format.parse_tasks(tasks_text)
    files = tasks_export_files(tasks, limit=export_limit(limit), metadata=metadata)
    return _zip_response(files, root=_root(name, key, key), total=len(tasks))
