"""`belvedir benchmarks add|list`: harnesses."""

from belvedir.cli.client import Client, CliError, out


def parse_env(pairs: list[str] | None) -> dict:
    env = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CliError(f"--env {pair!r}: write KEY=VALUE")
        key, value = pair.split("=", 1)
        env[key] = value
    return env


def cmd_benchmarks_add(client: Client, args) -> int:
    body = {"env": parse_env(args.env)} if args.env else {}
    for field in (
        "name",
        "repo_url",
        "ref",
        "install_command",
        "run_command",
        "compute",
        "gpu_type",
        "preset",
    ):
        value = getattr(args, field)
        if value is not None:
            body[field] = value
    if args.tasks_file:
        try:
            with open(args.tasks_file, encoding="utf-8") as f:
                body["tasks"] = f.read()
        except OSError as exc:
            raise CliError(f"--tasks-file: {exc.strerror}: {args.tasks_file}") from None
    if args.env and args.preset:
        # Preset env plus the given keys: fetch the card so its defaults are kept.
        catalog = client.get("/api/v1/catalog")
        for group in catalog["groups"]:
            for p in group["presets"]:
                if p["slug"] == args.preset:
                    body["env"] = {**p["env"], **body["env"]}
    harness = client.post("/api/v1/harnesses", json=body)
    out(args, harness, [f"created {harness['id']}  {harness['name']}"])
    return 0


def cmd_benchmarks_list(client: Client, args) -> int:
    data = client.get("/api/v1/harnesses", params={"limit": args.limit})
    lines = [f"{h['id']}  {h['name']:<30} {h['compute']}  {h['repo_url']}" for h in data["results"]]
    out(args, data, lines or ["no harnesses"])
    return 0


def register(sub) -> None:
    bench = sub.add_parser("benchmarks", help="harnesses").add_subparsers(
        dest="action", required=True
    )
    add = bench.add_parser("add", help="register a harness, from --preset or from flags")
    add.add_argument("--preset")
    add.add_argument("--name")
    add.add_argument("--repo", dest="repo_url")
    add.add_argument("--ref")
    add.add_argument("--install", dest="install_command")
    add.add_argument("--run", dest="run_command")
    add.add_argument("--compute", choices=["cpu", "gpu"])
    add.add_argument("--gpu-type", dest="gpu_type")
    add.add_argument("--env", action="append", metavar="KEY=VALUE")
    add.add_argument("--tasks-file")
    add.set_defaults(func=cmd_benchmarks_add)
    ls = bench.add_parser("list", help="list harnesses")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=cmd_benchmarks_list)
