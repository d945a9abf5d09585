"""The Belvedir Runner: read the tasks, answer each task BELVEDIR_TASK_ATTEMPTS times (the
model, or your agent service), judge every answer, fold the attempts and write results.json."""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from belvedir_runner import grading, judge
from belvedir_runner.judge import CallFailed, Endpoint, Unreachable
from belvedir_runner.tasks import HARBOR_ONLY, TasksError, parse_text
from belvedir_runner.tracing import Tracing, note

SYSTEM_PROMPT = "Answer the task. Give your final answer in full."
RESULTS_MAX_BYTES = 240 * 1024  # the platform keeps results up to 256 KB
ANSWER_CLIP = 2000


class Stop(Exception):
    """The run cannot go on; the message is the note to print."""


@dataclass
class Settings:
    tasks_file: str
    attempts: int
    grading: str
    threshold: float
    concurrency: int
    model: Endpoint | None
    agent_url: str
    agent_token: str
    judge: Endpoint | None
    results_path: Path
    patience: dict  # retries, backoff, timeout for every endpoint

    @classmethod
    def from_env(cls, env=None) -> Settings:
        env = os.environ if env is None else env
        tasks_file = env.get("BELVEDIR_TASKS_FILE") or env.get("FRACTAL_TASKS_FILE") or ""
        if not tasks_file:
            raise Stop(
                "no tasks: BELVEDIR_TASKS_FILE is not set. Put your task list in the harness's "
                "Tasks field (format: docs/tasks-format.md)."
            )
        try:
            grading_rule = grading.grading_from(env.get("BELVEDIR_GRADING"))
        except ValueError as exc:
            raise Stop(str(exc)) from None
        patience = {
            "retries": _number(env, "RUNNER_RETRIES", 4, int, 0, 20),
            "backoff": _number(env, "RUNNER_BACKOFF_SECONDS", 1.0, float, 0, 60),
            "timeout": _number(env, "RUNNER_TIMEOUT_SECONDS", 120.0, float, 1, 3600),
        }
        agent_url = env.get("BELVEDIR_AGENT_URL", "").strip()
        model = None
        if not agent_url:
            if not env.get("MODEL"):
                raise Stop("MODEL is not set: name the model under test (or BELVEDIR_AGENT_URL).")
            model = Endpoint(
                model=env["MODEL"],
                api_base=env.get("MODEL_API_BASE") or judge.DEFAULT_API_BASE,
                api_key=env.get("MODEL_API_KEY", ""),
                label="the model",
                **patience,
            )
        judge_endpoint = None
        if env.get("JUDGE_MODEL"):
            # A judge without its own base and key uses the model's (e.g. the platform's router).
            own = env.get("JUDGE_API_BASE") or env.get("JUDGE_API_KEY")
            judge_endpoint = Endpoint(
                model=env["JUDGE_MODEL"],
                api_base=(env.get("JUDGE_API_BASE") if own else env.get("MODEL_API_BASE"))
                or judge.DEFAULT_API_BASE,
                api_key=env.get("JUDGE_API_KEY", "") if own else env.get("MODEL_API_KEY", ""),
                label="the judge",
                **patience,
            )
        return cls(
            tasks_file=tasks_file,
            attempts=_number(env, "BELVEDIR_TASK_ATTEMPTS", 1, int, 1, 100),
            grading=grading_rule,
            threshold=_number(env, "RUNNER_PASS_THRESHOLD", grading.PASS_THRESHOLD, float, 0, 1),
            concurrency=_number(env, "RUNNER_CONCURRENCY", 4, int, 1, 64),
            model=model,
            agent_url=agent_url,
            agent_token=env.get("BELVEDIR_AGENT_TOKEN", ""),
            judge=judge_endpoint,
            results_path=Path(env.get("RUNNER_RESULTS", "results.json")),
            patience=patience,
        )


def _number(env, name: str, default, kind, low, high):
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise Stop(f"{name} is {raw!r}; it must be a number from {low} to {high}.") from None
    if not low <= value <= high:
        raise Stop(f"{name} is {raw!r}; it must be a number from {low} to {high}.")
    return value


def load_tasks(path: str) -> list[dict]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise Stop(f"the tasks file {path} cannot be read: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise Stop(f"the tasks file {path} is not UTF-8 text.") from None
    try:
        tasks = parse_text(text)
    except TasksError as exc:
        raise Stop(str(exc)) from None
    harbor_only = [t for t in tasks if t["verifier"]["kind"] in HARBOR_ONLY]
    if harbor_only:
        named = ", ".join(f"{t['id']} ({t['verifier']['kind']})" for t in harbor_only)
        raise Stop(
            f"refusing to run: {named} run under Harbor only. code and state_diff tasks need "
            "their own container: use the Belvedir Runner on Harbor, or take them out."
        )
    return tasks


def ask_agent(settings: Settings, task: dict, attempt: int) -> tuple[str, dict]:
    """POST the task as JSON to BELVEDIR_AGENT_URL; the answer is the reply's `answer` (or
    `output`, `content`, `text`), or the reply's text when it is not a JSON object."""
    endpoint = Endpoint(
        model="",
        api_base=settings.agent_url,
        label="the agent service",
        **settings.patience,
    )
    headers = {"Authorization": f"Bearer {settings.agent_token}"} if settings.agent_token else {}
    body = {
        "id": task["id"],
        "prompt": task["prompt"],
        "attempt": attempt,
        "metadata": task["metadata"],
    }
    _, reply = judge.call_with_retries(endpoint, settings.agent_url, body, headers)
    if isinstance(reply, dict):
        for key in ("answer", "output", "content", "text"):
            if isinstance(reply.get(key), str):
                usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
                return reply[key], {
                    "input": int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0),
                    "output": int(
                        usage.get("completion_tokens") or usage.get("output_tokens") or 0
                    ),
                }
        raise CallFailed("the agent service answered JSON without an answer field")
    return str(reply), {"input": 0, "output": 0}


class Runner:
    def __init__(self, settings: Settings, tasks: list[dict], tracing: Tracing) -> None:
        self.settings = settings
        self.tasks = tasks
        self.tracing = tracing
        self.stopped: str | None = None
        self._lock = threading.Lock()

    def answer(self, task: dict, attempt: int) -> tuple[str, dict]:
        if self.settings.agent_url:
            return ask_agent(self.settings, task, attempt)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task["prompt"]},
        ]
        return judge.chat(self.settings.model, messages)

    def attempt(self, task: dict, number: int) -> dict:
        record: dict = {"attempt": number}
        try:
            answer, tokens = self.answer(task, number)
        except CallFailed as exc:
            return {**record, "score": 0.0, "passed": False, "error": str(exc)}
        record.update(answer=answer[:ANSWER_CLIP], tokens=tokens)
        try:
            verdict = judge.grade(self.settings.judge, task, answer)
        except CallFailed as exc:
            # Not the model's 0: the answer was never judged, so the attempt is not scored.
            return {**record, "errored": str(exc)}
        return {
            **record,
            "score": verdict["score"],
            "passed": verdict["score"] >= self.settings.threshold,
            "reason": verdict["reason"],
            "judge_tokens": verdict["tokens"],
        }

    def run_task(self, task: dict) -> dict:
        attempts = []
        with self.tracing.task(task["id"]):
            for number in range(1, self.settings.attempts + 1):
                if self.stopped:
                    break
                try:
                    attempts.append(self.attempt(task, number))
                except Unreachable as exc:
                    with self._lock:
                        self.stopped = self.stopped or str(exc)
                    break
        judged = [a for a in attempts if "errored" not in a]
        scores = [a["score"] for a in judged]
        # An answer the judge could not grade is errored, not a 0; all of them: no score.
        score = grading.task_result(
            scores, len(attempts) - len(judged), self.settings.grading, self.settings.threshold
        )
        result = {
            "id": task["id"],
            "kind": task["verifier"]["kind"],
            "score": score,
            "passed": sum(a["passed"] for a in judged),
            "attempts": attempts,
        }
        if score is None:
            result["errored"] = attempts[-1]["errored"]
        if task["metadata"]:
            result["metadata"] = task["metadata"]
        if task["metadata"].get("group") is not None:
            # Tasks of one group are not independent: the platform clusters the score's
            # standard error by it (docs/harness-contract.md).
            result["group"] = str(task["metadata"]["group"])
        status = " ".join("errored" if "errored" in a else f"{a['score']:.2f}" for a in attempts)
        shown = "errored" if result["score"] is None else f"{result['score']:.3f}"
        print(f"{task['id']}: {shown} (attempts {status or '-'})", flush=True)
        return result

    def run(self) -> dict:
        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            results = list(pool.map(self.run_task, self.tasks))
        if self.stopped:
            raise Stop(self.stopped)
        return summary(self.settings, results, self.tracing.status)


def summary(settings: Settings, results: list[dict], tracing: str) -> dict:
    tokens = {"input": 0, "output": 0, "judge_input": 0, "judge_output": 0}
    for result in results:
        for attempt in result["attempts"]:
            tokens["input"] += attempt.get("tokens", {}).get("input", 0)
            tokens["output"] += attempt.get("tokens", {}).get("output", 0)
            tokens["judge_input"] += attempt.get("judge_tokens", {}).get("input", 0)
            tokens["judge_output"] += attempt.get("judge_tokens", {}).get("output", 0)
    errors = sum(1 for r in results for a in r["attempts"] if "error" in a)
    scored = [r["score"] for r in results if r["score"] is not None]
    errored = {r["id"]: r["errored"] for r in results if r["score"] is None}
    document = {
        # Over the tasks that were judged; none judged (every one errored): no score.
        "score": grading.run_result([r["score"] for r in results]),
        "grading": settings.grading,
        "attempts": settings.attempts,
        "pass_threshold": settings.threshold,
        "passed": sum(1 for score in scored if score >= settings.threshold),
        "failed": sum(1 for score in scored if score < settings.threshold),
        "errors": errors,
        "errored": errored,
        "judge_model": settings.judge.model if settings.judge else None,
        "tokens": tokens,
        "tracing": tracing,
        "tasks": results,
    }
    if settings.agent_url:
        document["agent_url"] = settings.agent_url
    else:
        document["model"] = settings.model.model
    return fit(document)


def fit(document: dict, limit: int = RESULTS_MAX_BYTES) -> dict:
    """Shrink the per-attempt detail (answers, then reasons) until results.json fits."""
    for clip in (ANSWER_CLIP, 500, 100, 0):
        if len(json.dumps(document).encode()) <= limit:
            return document
        for result in document["tasks"]:
            for attempt in result["attempts"]:
                if "answer" in attempt:
                    attempt["answer"] = attempt["answer"][:clip]
                if "reason" in attempt and clip < 500:
                    attempt["reason"] = attempt["reason"][: max(clip, 80)]
    if len(json.dumps(document).encode()) > limit:
        for result in document["tasks"]:
            result.pop("attempts", None)
        document["detail"] = "per-attempt detail left out: results must stay under 256 KB"
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m belvedir_runner", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the settings and the tasks file, say what will run, and exit",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        settings = Settings.from_env()
        tasks = load_tasks(settings.tasks_file)
        if settings.judge is None:
            raise Stop("JUDGE_MODEL is not set: judge and rubric tasks need the judge.")
    except Stop as exc:
        note(str(exc))
        return 2
    who = f"agent service {settings.agent_url}" if settings.agent_url else settings.model.model
    print(
        f"belvedir-runner: {len(tasks)} tasks x {settings.attempts} attempts, {settings.grading},"
        f" answered by {who}, judged by {settings.judge.model}",
        flush=True,
    )
    if args.check:
        try:
            import belvedir  # noqa: F401

            print("belvedir-runner: the belvedir SDK is installed; runs are traced.", flush=True)
        except ImportError:
            note("the belvedir SDK is not installed; runs will not be traced.")
        return 0
    tracing = Tracing()
    try:
        document = Runner(settings, tasks, tracing).run()
    except Stop as exc:
        note(f"stopped: {exc}")
        tracing.finish(False)
        return 3
    settings.results_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    if document["score"] is None:
        note(
            f"every task errored ({len(document['errored'])} of {len(tasks)}): the judge "
            "could not grade any answer, so there is no score (see errored in results.json)."
        )
        tracing.finish(False)
        return 3
    if document["errored"]:
        note(
            f"{len(document['errored'])} of {len(tasks)} tasks errored (the judge could not "
            "grade them) and are not in the score."
        )
    print(
        f"belvedir-runner: score {document['score']:.4f} ({settings.grading}) over"
        f" {len(tasks) - len(document['errored'])} of {len(tasks)} tasks in {time.monotonic() - started:.1f} s; tracing {tracing.status}",
        flush=True,
    )
    tracing.finish(True)
    return 0
