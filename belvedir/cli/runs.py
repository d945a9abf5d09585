"""`belvedir runs launch|list|get|watch|cancel|compare`: benchmark runs."""

import argparse
import json
import os
import sys
import time

from belvedir.cli.client import Client, out
from belvedir.text import difference_text, p_value_text, score_text, score_with_error

TERMINAL = ("succeeded", "failed", "cancelled")


def _score(run: dict) -> str:
    """The score with its standard error when the API gives one: "0.620 ± 0.069"."""
    return score_with_error(run["score"], run.get("score_stderr"))


def _interval(run: dict) -> str:
    """ " (95% CI 0.484–0.756, 50 tasks)" when the run has one."""
    if run.get("score_stderr") is None:
        return ""
    low, high = score_text(run.get("score_ci_low")), score_text(run.get("score_ci_high"))
    return f" (95% CI {low}–{high}, {run.get('n_tasks')} tasks)"


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
    out(args, run, [f"launched {run['id']}  status {run['status']}"])
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
        f"{r['id']}  {r['status']:<9}  score={_score(r)}  {r['harness_name']}  {r['model']}"
        for r in data["results"]
    ]
    out(args, data, lines or ["no runs"])
    return 0


def cmd_runs_get(client: Client, args) -> int:
    run = client.get(f"/api/v1/runs/{args.id}")
    out(
        args,
        run,
        [f"{run['id']}  {run['status']}  score={_score(run)}{_interval(run)}", *run["notes"]],
    )
    return 0 if run["status"] != "failed" else 1


def cmd_runs_cancel(client: Client, args) -> int:
    run = client.post(f"/api/v1/runs/{args.id}/cancel")
    out(args, run, [f"{run['id']}  {run['status']}"])
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
        if data["status"] in TERMINAL:
            run = client.get(f"/api/v1/runs/{args.id}")
            if args.json:
                print(json.dumps(run, indent=2))
            else:
                print(f"\n{run['id']} {run['status']} score={_score(run)}{_interval(run)}")
                for note in run["notes"]:
                    print(note)
            return 0 if run["status"] == "succeeded" else 1
        time.sleep(args.interval)


def compare_lines(data: dict) -> list[str]:
    """GET /api/v1/runs/compare's answer as the CLI prints it."""
    lines = [
        f"{label} {run['id']}  score={score_text(run['score'])}  {run['harness_name']}  "
        f"{run['model']}"
        for label, run in (("A", data["a"]), ("B", data["b"]))
    ]
    lines.append(data["summary"])
    if data["difference"] is not None:
        low, high = difference_text(data["ci_low"]), difference_text(data["ci_high"])
        lines += [
            f"B - A {difference_text(data['difference'])} ± {score_text(data['stderr'])} "
            f"(95% CI {low} to {high}), p {p_value_text(data['p_value'])} "
            "(two-sided, normal approximation)",
            f"tasks: B won {data['b_won']}, tied {data['tied']}, A won {data['a_won']} "
            f"of {data['shared_tasks']}",
        ]
    for label, run in (("A", data["a"]), ("B", data["b"])):
        if run["tasks_only_here"]:
            only = run["tasks_only_here"]
            lines.append(f"only in {label}, not compared ({len(only)}): {', '.join(only)}")
    return lines + data["notes"]


def cmd_runs_compare(client: Client, args) -> int:
    data = client.get("/api/v1/runs/compare", params={"runs": f"{args.a},{args.b}"})
    out(args, data, compare_lines(data))
    return 0


def register(sub) -> None:
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
    compare = runs.add_parser("compare", help="compare two runs task by task (B - A)")
    compare.add_argument("a", help="run A's id")
    compare.add_argument("b", help="run B's id")
    compare.set_defaults(func=cmd_runs_compare)
