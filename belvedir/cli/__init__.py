"""The `belvedir` command line: a thin client of the REST API.

Configure with BELVEDIR_API_KEY (a project key) and BELVEDIR_URL (default http://127.0.0.1:8000).
One module per command group (`catalog`, `benchmarks`, `environments`, `runs`, `billing`,
`models`), each with a `register(sub)`;
`client` holds the HTTP client and its error. Nothing here imports Django.
"""

import argparse
import os
import sys

from belvedir.cli import benchmarks, billing, catalog, environments, models, runs
from belvedir.cli.client import DEFAULT_URL, Client, CliError

COMMAND_GROUPS = (catalog, benchmarks, environments, runs, billing, models)


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
    for group in COMMAND_GROUPS:
        group.register(sub)
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
