"""A harness that follows (or breaks, on request) the Belvedir harness contract."""

import json
import os
import sys
import time

CONTRACT = [
    "BELVEDIR_API_KEY",
    "BELVEDIR_BASE_URL",
    "BELVEDIR_RUN_ID",
    "BELVEDIR_TASKS_FILE",
    "BELVEDIR_TASK_ATTEMPTS",
    "BELVEDIR_GRADING",
    "FRACTAL_API_KEY",
    "FRACTAL_BASE_URL",
    "FRACTAL_RUN_ID",
    "FRACTAL_TASKS_FILE",
    "MODEL",
    "MODEL_API_BASE",
    "JUDGE_MODEL",
    "JUDGE_API_BASE",
    "HARNESS_OWN",
]


def marker() -> str | None:
    """marker.txt at the repo root, so a test can tell which commit was checked out."""
    try:
        with open("marker.txt", encoding="utf-8") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def main() -> int:
    env = os.environ
    print(
        f"run {env.get('BELVEDIR_RUN_ID')} starting in {os.getcwd()} as uid {os.getuid()}",
        flush=True,
    )
    assert os.path.exists(".installed"), "install.sh did not run first"
    if env.get("ECHO_SECRET") == "1":
        print(f"the model key is {env.get('MODEL_API_KEY')}", flush=True)
        print(f"the judge key is {env.get('JUDGE_API_KEY')}", file=sys.stderr, flush=True)
    for i in range(int(env.get("SPAM_KB", "0"))):
        # Numbered 1024-byte lines (with two-byte characters), so a test can tell which
        # ones the log tail kept and that it counts bytes, not characters.
        print(f"spam {i:06d} " + "é" * 20 + "x" * 971, flush=True)
    for i in range(int(env.get("SLEEP", "0"))):
        print(f"tick {i}", flush=True)
        time.sleep(1)
    if env.get("TRACE_TO"):
        # One span sent with the real belvedir SDK to TRACE_TO (a test points it nowhere, so
        # the SDK's exporter says "spans dropped").
        import belvedir

        belvedir.initialize(
            api_key=env.get("BELVEDIR_API_KEY", ""), base_url=env["TRACE_TO"], disable_batch=True
        )
        with belvedir.session(session_id=env.get("BELVEDIR_RUN_ID", "")), belvedir.task("t1"):
            pass
        belvedir.flush()
    tasks_preview = None
    if env.get("BELVEDIR_TASKS_FILE"):
        with open(env["BELVEDIR_TASKS_FILE"], encoding="utf-8") as f:
            tasks_preview = f.read()[:200]
    if env.get("RESULTS_RAW") is not None:
        with open("results.json", "w", encoding="utf-8") as f:
            f.write(env["RESULTS_RAW"])
    elif env.get("BIG_RESULTS") == "1":
        with open("results.json", "w", encoding="utf-8") as f:
            json.dump({"score": 0.5, "padding": "x" * (300 * 1024)}, f)
    elif env.get("NO_RESULTS") != "1":
        results = {
            "passed": 17,
            "failed": 3,
            "seen_env": {k: env.get(k) for k in CONTRACT},
            "has_model_api_key": bool(env.get("MODEL_API_KEY")),
            "tasks_preview": tasks_preview,
            "uid": os.getuid(),
            "cwd": os.getcwd(),
            "marker": marker(),
        }
        score = env.get("SCORE", "0.85")
        if score != "omit":
            results["score"] = "__SCORE__"
        if env.get("REPORT_MODEL"):
            reported = env["REPORT_MODEL"]
            # "$NAME" reports the value of env var NAME (a test writes a secret this way).
            results["model"] = env.get(reported[1:]) if reported.startswith("$") else reported
        text = json.dumps(results).replace('"__SCORE__"', score)
        with open("results.json", "w", encoding="utf-8") as f:
            f.write(text)
    print("done", flush=True)
    return int(env.get("EXIT_CODE", "0"))


if __name__ == "__main__":
    sys.exit(main())
