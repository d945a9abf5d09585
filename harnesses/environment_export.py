"""An environment as a Harbor dataset (harnesses.harbor_export): its tasks, the base image from
the settings, and the environment's id, name and version in every task.toml."""

import re
from collections.abc import Iterator

from django.conf import settings
from django.http import StreamingHttpResponse

from belvedir.errors import Invalid
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


def environment_export_files(
    *, environment: Environment, limit: int | None = None
) -> list[ExportFile]:
    """The Harbor export of the environment's current version (its first `limit` tasks)."""
    options = ExportOptions(
        base_image=settings.BELVEDIR_EXPORT_BASE_IMAGE,
        # The verifier's judge where the run (or your shell) sets no JUDGE_MODEL.
        judge_model=settings.BELVEDIR_DEFAULT_JUDGE_MODEL,
        limit=limit,
        metadata={
            "environment": environment.pk,
            "environment_name": environment.name,
            "environment_version": environment.version,
        },
    )
    try:
        return export_files(environment_tasks(environment=environment), options)
    except ExportError as exc:
        raise Invalid(str(exc)) from None


def export_root(environment: Environment) -> str:
    """The export's folder name: the environment's name as a file name, and its version."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", environment.name).strip("-.") or environment.pk
    return f"{name[:60]}-v{environment.version}"


def environment_export_zip(
    *, environment: Environment, limit: int | None = None
) -> tuple[str, Iterator[bytes]]:
    """(file name, the zip's bytes as they are written): files under `export_root/`."""
    files = environment_export_files(environment=environment, limit=limit)
    root = export_root(environment)
    return f"{root}.zip", zip_stream(files, root=root)


def environment_export_response(*, environment: Environment, limit) -> StreamingHttpResponse:
    """The zip download the API and the environment page answer with; `limit` as given
    (blank: every task)."""
    filename, chunks = environment_export_zip(environment=environment, limit=export_limit(limit))
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    # Every task of the version, however many `limit` let in (a driver's "ran N of M").
    response[TASKS_TOTAL_HEADER] = str(len(environment_tasks(environment=environment)))
    return response
