"""The `belvedir` command line: a thin client of the REST API.

Configure with BELVEDIR_API_KEY (a project key) and BELVEDIR_URL (default http://127.0.0.1:8000).
"""

import argparse
import json
import os
import sys
import time

import requests

DEFAULT_URL = "http://127.0.0.1:8000"


class CliError(Exception):
    pass


class Client:
    def __init__(self, url: str, key: str, timeout: float = 30):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"
        self.timeout = timeout

    def request(self, method: str, path: str, **kwargs):
        try:
            response = self.session.request(method, self.url + path, timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise CliError(f"cannot reach {self.url}: {exc.__class__.__name__}") from None
        if response.status_code >= 400:
            raise CliError(_error_text(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw):
        return self.request("POST", path, **kw)


def _error_text(response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    if isinstance(body, dict):
        parts = []
        for field, errors in body.items():
            errors = errors if isinstance(errors, list) else [errors]
            text = "; ".join(str(e) for e in errors)
            parts.append(text if field == "detail" else f"{field}: {text}")
        return f"HTTP {response.status_code}: " + " | ".join(parts)
    return f"HTTP {response.status_code}: {body}"


def _parse_env(pairs: list[str]) -> dict:
    env = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CliError(f"--env {pair!r}: write KEY=VALUE")
        key, value = pair.split("=", 1)
        env[key] = value
    return env


def _out(args, data, text_lines) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for line in text_lines:
            print(line)


def cmd_catalog(client: Client, args) -> int:
    data = client.get("/api/v1/catalog")
    lines = []
    for group in data["groups"]:
        lines.append(f"{group['group']}:")
        for p in group["presets"]:
            flag = "" if p["available"] else "  (not yet available)"
            lines.append(f"  {p['slug']:<22} {p['name']}{flag}")
    _out(args, data, lines)
    return 0


def cmd_benchmarks_add(client: Client, args) -> int:
    body = {"env": _parse_env(args.env)} if args.env else {}
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
    _out(args, harness, [f"created {harness['id']}  {harness['name']}"])
    return 0


def cmd_benchmarks_list(client: Client, args) -> int:
    data = client.get("/api/v1/harnesses", params={"limit": args.limit})
    lines = [f"{h['id']}  {h['name']:<30} {h['compute']}  {h['repo_url']}" for h in data["results"]]
    _out(args, data, lines or ["no harnesses"])
    return 0


def cmd_runs_launch(client: Client, args) -> int:
    body = {"harness": args.harness, "attempts": args.attempts, "grading": args.grading}
    for field in (
        "model",
        "model_api_base",
        "model_api_key",
        "judge_model",
        "judge_api_base",
        "judge_api_key",
    ):
        value = getattr(args, field)
        if value is None and field.endswith("_api_key"):
            # Keys from the environment stay out of `ps` and shell history.
            value = os.environ.get(field.upper()) or None
        if value is not None:
            body[field] = value
    run = client.post("/api/v1/runs", json=body)
    _out(args, run, [f"launched {run['id']}  status {run['status']}"])
    if args.watch:
        return cmd_runs_watch(client, argparse.Namespace(**{**vars(args), "id": run["id"]}))
    return 0


def cmd_runs_list(client: Client, args) -> int:
    params = {"limit": args.limit}
    for field in ("harness", "status", "model"):
        if getattr(args, field):
            params[field] = getattr(args, field)
    data = client.get("/api/v1/runs", params=params)
    lines = [
        f"{r['id']}  {r['status']:<9}  score={'' if r['score'] is None else r['score']}  {r['harness_name']}  {r['model']}"
        for r in data["results"]
    ]
    _out(args, data, lines or ["no runs"])
    return 0


def cmd_runs_get(client: Client, args) -> int:
    run = client.get(f"/api/v1/runs/{args.id}")
    _out(args, run, [f"{run['id']}  {run['status']}  score={run['score']}", *run["notes"]])
    return 0 if run["status"] != "failed" else 1


def cmd_runs_cancel(client: Client, args) -> int:
    run = client.post(f"/api/v1/runs/{args.id}/cancel")
    _out(args, run, [f"{run['id']}  {run['status']}"])
    return 0


def cmd_runs_watch(client: Client, args) -> int:
    """Follow the log until the run ends; non-zero exit when it did not succeed."""
    offset = 0
    while True:
        data = client.get(f"/api/v1/runs/{args.id}/log", params={"offset": offset})
        if data["text"] and not args.json:
            sys.stdout.write(data["text"])
            sys.stdout.flush()
        offset = data["offset"]
        if data["status"] in ("succeeded", "failed", "cancelled"):
            run = client.get(f"/api/v1/runs/{args.id}")
            if args.json:
                print(json.dumps(run, indent=2))
            else:
                print(f"\n{run['id']} {run['status']} score={run['score']}")
                for note in run["notes"]:
                    print(note)
            return 0 if run["status"] == "succeeded" else 1
        time.sleep(args.interval)


def _json_flag_on_every_command(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Accept `--json` after the command too (`belvedir benchmarks list --json`).

    SUPPRESS keeps a subcommand from resetting a `--json` given before the command.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if not any("--json" in a.option_strings for a in sub._actions):
                    sub.add_argument(
                        "--json",
                        action="store_true",
                        default=argparse.SUPPRESS,
                        help="machine-readable output",
                    )
                _json_flag_on_every_command(sub)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="belvedir", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--url", default=None, help="platform URL (env BELVEDIR_URL)")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("catalog", help="list the catalog's presets").set_defaults(func=cmd_catalog)

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

    runs = sub.add_parser("runs", help="benchmark runs").add_subparsers(
        dest="action", required=True
    )
    launch = runs.add_parser("launch", help="launch a run of a harness")
    launch.add_argument("harness", help="harness id")
    launch.add_argument("--model")
    launch.add_argument("--model-api-base")
    launch.add_argument("--model-api-key", help="default: $MODEL_API_KEY")
    launch.add_argument("--judge-model")
    launch.add_argument("--judge-api-base")
    launch.add_argument("--judge-api-key", help="default: $JUDGE_API_KEY")
    launch.add_argument("--attempts", type=int, default=1)
    launch.add_argument("--grading", default="pass@1", choices=["pass@1", "pass@k", "mean"])
    launch.add_argument("--watch", action="store_true", help="follow the log until the run ends")
    launch.add_argument("--interval", type=float, default=1.0)
    launch.set_defaults(func=cmd_runs_launch)
    rl = runs.add_parser("list", help="list runs")
    rl.add_argument("--harness")
    rl.add_argument("--status")
    rl.add_argument("--model")
    rl.add_argument("--limit", type=int, default=50)
    rl.set_defaults(func=cmd_runs_list)
    for name, func, text in [
        ("get", cmd_runs_get, "show a run"),
        ("watch", cmd_runs_watch, "follow a run's log until it ends"),
        ("cancel", cmd_runs_cancel, "cancel a run"),
    ]:
        p = runs.add_parser(name, help=text)
        p.add_argument("id")
        p.add_argument("--interval", type=float, default=1.0)
        p.set_defaults(func=func)
    return _json_flag_on_every_command(parser)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    key = os.environ.get("BELVEDIR_API_KEY", "")
    url = args.url or os.environ.get("BELVEDIR_URL") or DEFAULT_URL
    if not key:
        print("belvedir: set BELVEDIR_API_KEY to a project key (bv_live_…)", file=sys.stderr)
        return 2
    try:
        return args.func(Client(url, key), args)
    except CliError as exc:
        print(f"belvedir: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
