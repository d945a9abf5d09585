"""`belvedir environments list|create|show|generate|save|export`: environments (task sets);
`export` lives in belvedir.cli.environment_export."""

import os
import sys
import time

from belvedir.cli.client import Client, CliError, out
from belvedir.cli.environment_export import add_export_parser

FINISHED = ("succeeded", "failed")


def _read(path: str, flag: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"{flag}: {exc.strerror}: {path}") from None
    except UnicodeDecodeError:
        raise CliError(f"{flag}: not UTF-8 text: {path}") from None


def _short(text: str, width: int = 70) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def task_lines(tasks: list[dict]) -> list[str]:
    return [f"  {t['id']:<24} {t['verifier']['kind']:<10} {_short(t['prompt'])}" for t in tasks]


def _saved_lines(environment: dict, harness: dict | None) -> list[str]:
    lines = [
        f"created {environment['id']}  {environment['name']}  "
        f"v{environment['version']}, {environment['task_count']} tasks"
    ]
    if harness:
        lines.append(f"harness {harness['id']}  {harness['name']}")
    return lines


def cmd_list(client: Client, args) -> int:
    data = client.get("/api/v1/environments", params={"limit": args.limit})
    lines = [
        f"{e['id']}  {e['name']:<30} v{e['version']:<3} {e['task_count']} tasks"
        for e in data["results"]
    ]
    out(args, data, lines or ["no environments"])
    return 0


def cmd_create(client: Client, args) -> int:
    body = {"name": args.name, "tasks": _read(args.tasks_file, "--tasks-file")}
    if args.description is not None:
        body["description"] = args.description
    environment = client.post("/api/v1/environments", json=body)
    harness = None
    if args.preset:
        harness = client.post(
            f"/api/v1/environments/{environment['id']}/harness", json={"preset": args.preset}
        )
    out(
        args,
        {"environment": environment, "harness": harness},
        _saved_lines(environment, harness),
    )
    return 0


def cmd_show(client: Client, args) -> int:
    params = {"version": args.version} if args.version else {}
    environment = client.get(f"/api/v1/environments/{args.id}", params=params)
    lines = [
        f"{environment['id']}  {environment['name']}  v{environment['version']}, "
        f"{environment['task_count']} tasks",
        *([environment["description"]] if environment["description"] else []),
        *task_lines(environment["tasks"]),
    ]
    out(args, environment, lines)
    return 0


def _wait(client: Client, generation: dict, timeout: float) -> dict:
    """Poll the generation until it is done, printing its progress to stderr."""
    deadline = time.monotonic() + timeout
    shown = ""
    while generation["status"] not in FINISHED:
        if generation["progress"] != shown:
            shown = generation["progress"]
            print(f"{generation['id']}: {shown}", file=sys.stderr)
        if time.monotonic() > deadline:
            raise CliError(
                f"generation {generation['id']} is still {generation['status']} after "
                f"{timeout:.0f} s; look again with `belvedir environments save {generation['id']}`"
            )
        time.sleep(1)
        generation = client.get(f"/api/v1/environments/generations/{generation['id']}")
    return generation


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _save(client: Client, args, generation: dict) -> int:
    body = {}
    if getattr(args, "name", None):
        body["name"] = args.name
    if getattr(args, "preset", None) is not None:
        body["preset"] = args.preset
    saved = client.post(f"/api/v1/environments/generations/{generation['id']}/save", json=body)
    out(args, saved, _saved_lines(saved["environment"], saved["harness"]))
    return 0


def _preview_and_save(client: Client, args, generation: dict) -> int:
    if generation["status"] == "failed":
        raise CliError(f"generation {generation['id']} failed: {generation['error']}")
    if not args.json:
        print(f"{generation['id']}: {len(generation['tasks'])} tasks")
        for line in task_lines(generation["tasks"]):
            print(line)
    if generation["environment"]:
        raise CliError(f"generation {generation['id']} is already saved")
    if args.yes or _confirm("Save these tasks as an environment?"):
        return _save(client, args, generation)
    if args.json:
        out(args, generation, [])
    print(
        f"not saved; save them with `belvedir environments save {generation['id']}`",
        file=sys.stderr,
    )
    return 0


def cmd_generate(client: Client, args) -> int:
    body = {"description": args.description, "model": args.model, "count": args.count}
    for field in ("name", "model_api_base", "preset"):
        if getattr(args, field) is not None:
            body[field] = getattr(args, field)
    # A key from the environment stays out of `ps` and shell history.
    key = args.model_api_key or os.environ.get("MODEL_API_KEY")
    if key:
        body["model_api_key"] = key
    generation = client.post("/api/v1/environments/generate", json=body)
    generation = _wait(client, generation, args.timeout)
    return _preview_and_save(client, args, generation)


def cmd_save(client: Client, args) -> int:
    generation = client.get(f"/api/v1/environments/generations/{args.id}")
    generation = _wait(client, generation, args.timeout)
    args.yes = True
    return _preview_and_save(client, args, generation)


def register(sub) -> None:
    envs = sub.add_parser("environments", help="environments (task sets)").add_subparsers(
        dest="action", required=True
    )
    ls = envs.add_parser("list", help="list environments")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=cmd_list)

    create = envs.add_parser("create", help="create an environment from a tasks file")
    create.add_argument("--name", required=True)
    create.add_argument(
        "--tasks-file", required=True, help="a JSON list, JSONL, or one judge task a line"
    )
    create.add_argument("--description")
    create.add_argument(
        "--preset", help="also make a harness from this card: runner or harbor-runner"
    )
    create.set_defaults(func=cmd_create)

    show = envs.add_parser("show", help="an environment and its tasks")
    show.add_argument("id")
    show.add_argument("--version", type=int, help="an earlier version")
    show.set_defaults(func=cmd_show)

    gen = envs.add_parser("generate", help="generate tasks from a description with a model")
    gen.add_argument("description", help="what the tasks should test")
    gen.add_argument("--model", required=True, help="model id, e.g. openai/gpt-4.1-mini")
    gen.add_argument("--name", help="the environment's name when saved")
    gen.add_argument("--count", type=int, default=5, help="how many tasks (1 to 50)")
    gen.add_argument("--model-api-base", dest="model_api_base")
    gen.add_argument(
        "--model-api-key",
        dest="model_api_key",
        help="your key (or MODEL_API_KEY); blank for a model the platform covers",
    )
    gen.add_argument(
        "--preset", help="make a harness from this card when saved: runner or harbor-runner"
    )
    gen.add_argument("--yes", action="store_true", help="save without asking")
    gen.add_argument("--timeout", type=float, default=600, help="seconds to wait")
    gen.set_defaults(func=cmd_generate)

    save = envs.add_parser("save", help="save a generation's tasks as an environment")
    save.add_argument("id", help="the generation id (gen_…)")
    save.add_argument("--name")
    save.add_argument("--preset")
    save.add_argument("--timeout", type=float, default=600, help="seconds to wait")
    save.set_defaults(func=cmd_save)

    add_export_parser(envs)
