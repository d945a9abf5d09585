"""`belvedir environments export <project> --id ENV --out DIR [--limit N]`: an environment as a
Harbor dataset, unpacked from the API's zip (GET /api/v1/environments/{id}/export) into DIR."""

import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from belvedir.cli.client import Client, CliError, out


def _check_project(client: Client, project: str) -> dict:
    """The key's project, which `project` must name (its id or its name)."""
    current = client.get("/api/v1/project")
    if project not in (current["id"], current["name"]):
        raise CliError(
            f"the API key belongs to project {current['name']!r} ({current['id']}), not {project!r}"
        )
    return current


def _members(archive: zipfile.ZipFile) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """The zip's files with the top folder taken off; refuses a path that would leave it."""
    members = []
    for info in archive.infolist():
        path = PurePosixPath(info.filename)
        if path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
            raise CliError(f"the export holds an unexpected path {info.filename!r}")
        if not info.is_dir():
            members.append((info, PurePosixPath(*path.parts[1:])))
    return members


def unpack(archive: zipfile.ZipFile, target: Path) -> list[str]:
    """Write the export's files under `target`; returns the task directories' names. Refuses
    to mix with an earlier export (a task directory that exists already)."""
    members = _members(archive)
    tasks = sorted({str(rel.parts[0]) for _, rel in members if len(rel.parts) > 1})
    clashes = [name for name in tasks if (target / name).exists()]
    if clashes:
        raise CliError(
            f"{target / clashes[0]} already exists; export into an empty directory "
            "(or remove the old export first)"
        )
    for info, rel in members:
        path = target.joinpath(*rel.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(archive.read(info))
        mode = (info.external_attr >> 16) & 0o777
        path.chmod(0o755 if mode & stat.S_IXUSR else 0o644)
    return tasks


def cmd_export(client: Client, args) -> int:
    project = _check_project(client, args.project)
    params = {"limit": args.limit} if args.limit is not None else {}
    target = Path(args.out)
    with tempfile.TemporaryFile() as spool:
        client.download(f"/api/v1/environments/{args.id}/export", spool, params=params)
        spool.seek(0)
        try:
            archive = zipfile.ZipFile(spool)
        except zipfile.BadZipFile:
            raise CliError("the server's answer is not a zip") from None
        with archive:
            tasks = unpack(archive, target)
    data = {"project": project["id"], "environment": args.id, "out": str(target), "tasks": tasks}
    out(
        args,
        data,
        [
            f"exported {len(tasks)} tasks to {target}",
            f"check the verifiers: harbor run -p {target} -a oracle -y",
        ],
    )
    return 0


def add_export_parser(actions) -> None:
    """`export` under the `environments` command's subcommands."""
    export = actions.add_parser(
        "export", help="write an environment as a Harbor dataset (one task directory per task)"
    )
    export.add_argument("project", help="the API key's project (its id or name)")
    export.add_argument("--id", required=True, help="the environment's id (env_…)")
    export.add_argument("--out", required=True, help="the directory to write the tasks into")
    export.add_argument("--limit", type=int, help="only the first N tasks (a smoke run)")
    export.set_defaults(func=cmd_export)
