"""The independent LLM judge, and the OpenAI-compatible chat call the Runner makes.

Standard library only, and self-contained, so the Harbor export can copy this one file next to
its verifier (`tests/test.sh`) and grade exactly as the Runner does:

    python3 judge.py --task task.json --answer /app/answer.md

prints {"score": 0..1, "reason": "..."} (exit 0), or a note on stderr and exit 2 when the
judge cannot be reached. The judge is JUDGE_MODEL through JUDGE_API_BASE (OpenAI-compatible)
with JUDGE_API_KEY as the bearer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

DEFAULT_API_BASE = "https://openrouter.ai/api/v1"
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
# Answers that mean the endpoint is set up wrong: no use going on with the next task.
FATAL_STATUSES = frozenset({401, 403, 404})
MAX_RETRY_AFTER = 60.0

JUDGE_SYSTEM = (
    "You are an impartial grader. You compare a candidate answer to a task against the task, "
    "its reference answer when there is one, and its grading criteria when there are some. "
    'Reply with one JSON object and nothing else: {"score": <number from 0 to 1>, "reason": '
    '"<one or two sentences>"}. Score 1 for a fully correct answer, 0 for a wrong or missing '
    "one. With criteria, the score is the fraction of the criteria the answer meets."
)


class Unreachable(Exception):
    """The endpoint cannot be used (connection refused, a timeout, 401/403/404 after retries)."""


class CallFailed(Exception):
    """This one call failed (a 400 for this prompt, retries used up on 429/5xx)."""


@dataclass
class Endpoint:
    """An OpenAI-compatible chat endpoint and how patiently to call it."""

    model: str
    api_base: str = DEFAULT_API_BASE
    api_key: str = ""
    retries: int = 4
    backoff: float = 1.0
    timeout: float = 120.0
    label: str = "the model"
    sleep: object = field(default=time.sleep, repr=False)

    @property
    def url(self) -> str:
        return self.api_base.rstrip("/") + "/chat/completions"


def backoff_delay(attempt: int, base: float, retry_after: str | None = None) -> float:
    """Seconds to wait before retry number `attempt` (0-based): Retry-After when the server
    gave one (capped), else base * 2^attempt with up to 25% jitter."""
    if retry_after:
        try:
            return max(0.0, min(float(retry_after), MAX_RETRY_AFTER))
        except ValueError:
            pass
    delay = base * (2**attempt)
    return delay + random.uniform(0, delay / 4)


def post_json(url: str, body: dict, headers: dict[str, str], timeout: float):
    """POST `body` as JSON: (status, headers, bytes). Uses httpx when it is installed (so the
    belvedir SDK's raw-HTTP capture traces the call), else urllib."""
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
    try:
        import httpx
    except ImportError:
        httpx = None
    if httpx is not None:
        try:
            response = httpx.post(url, content=data, headers=headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise OSError(f"{type(exc).__name__}: {exc}") from None
        return response.status_code, dict(response.headers), response.content
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers or {}), exc.read()
    except urllib.error.URLError as exc:
        raise OSError(str(exc.reason)) from None


def call_with_retries(endpoint: Endpoint, url: str, body: dict, headers: dict[str, str]):
    """POST with retries on 429/5xx and connection errors: (status, parsed JSON or text).

    Raises Unreachable when the endpoint never answers or refuses the setup (401/403/404),
    CallFailed on another error status or when retries run out on 429/5xx."""
    last = ""
    for attempt in range(endpoint.retries + 1):
        try:
            status, response_headers, raw = post_json(url, body, headers, endpoint.timeout)
        except (OSError, TimeoutError) as exc:
            last = str(exc) or type(exc).__name__
            if attempt < endpoint.retries:
                endpoint.sleep(backoff_delay(attempt, endpoint.backoff))
                continue
            raise Unreachable(f"{endpoint.label} at {url} is unreachable: {last}") from None
        text = raw.decode("utf-8", "replace")
        if 200 <= status < 300:
            try:
                return status, json.loads(text)
            except ValueError:
                return status, text
        last = f"HTTP {status}: {_error_message(text)}"
        if status in RETRY_STATUSES and attempt < endpoint.retries:
            retry_after = {k.lower(): v for k, v in response_headers.items()}.get("retry-after")
            endpoint.sleep(backoff_delay(attempt, endpoint.backoff, retry_after))
            continue
        if status in FATAL_STATUSES:
            raise Unreachable(f"{endpoint.label} at {url} refused the call: {last}")
        raise CallFailed(f"{endpoint.label} failed: {last}")
    raise CallFailed(f"{endpoint.label} failed: {last}")  # pragma: no cover


def _error_message(text: str) -> str:
    try:
        document = json.loads(text)
    except ValueError:
        return text.strip()[:300] or "no body"
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return text.strip()[:300]


def chat(endpoint: Endpoint, messages: list[dict], **extra) -> tuple[str, dict]:
    """One chat completion: (reply text, usage {"input", "output"})."""
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    body = {"model": endpoint.model, "messages": messages, **extra}
    _, document = call_with_retries(endpoint, endpoint.url, body, headers)
    try:
        message = document["choices"][0]["message"]
        content = message.get("content") or ""
    except (KeyError, IndexError, TypeError):
        raise CallFailed(f"{endpoint.label} answered without choices[0].message") from None
    if isinstance(content, list):  # content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    usage = document.get("usage") if isinstance(document, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    tokens = {
        "input": int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0),
        "output": int(usage.get("completion_tokens") or usage.get("output_tokens") or 0),
    }
    return str(content), tokens


def judge_messages(task: dict, candidate: str) -> list[dict]:
    """What the judge is asked for one task and one candidate answer."""
    parts = [f"## Task\n{task['prompt']}"]
    if task.get("answer"):
        parts.append(f"## Reference answer\n{task['answer']}")
    verifier = task.get("verifier") or {}
    if verifier.get("kind") == "rubric":
        criteria = "\n".join(f"{n}. {c}" for n, c in enumerate(verifier["criteria"], start=1))
        parts.append(f"## Criteria (score = fraction met)\n{criteria}")
    parts.append(f"## Candidate answer\n{candidate if candidate.strip() else '(empty)'}")
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)


def read_verdict(reply: str) -> tuple[float, str]:
    """(score in [0, 1], reason) from the judge's reply; unreadable → (0, saying so)."""
    candidates = [reply.strip()] + [m.group(0) for m in _OBJECT.finditer(reply)]
    for text in candidates:
        try:
            document = json.loads(text)
        except ValueError:
            continue
        if isinstance(document, dict) and "score" in document:
            try:
                score = float(document["score"])
            except (TypeError, ValueError):
                continue
            if score != score:  # NaN
                continue
            reason = str(document.get("reason") or "").strip()
            return min(max(score, 0.0), 1.0), reason or "(no reason given)"
    word = reply.strip().upper()
    if word.startswith("PASS"):
        return 1.0, reply.strip()[:500]
    if word.startswith("FAIL"):
        return 0.0, reply.strip()[:500]
    return 0.0, f"the judge's reply could not be read as a score: {reply.strip()[:200]!r}"


def grade(endpoint: Endpoint, task: dict, candidate: str) -> dict:
    """Judge one answer: {"score", "reason", "tokens"}. Raises Unreachable / CallFailed."""
    reply, tokens = chat(endpoint, judge_messages(task, candidate), temperature=0)
    score, reason = read_verdict(reply)
    return {"score": score, "reason": reason, "tokens": tokens}


def endpoint_from_env(env=None, **overrides) -> Endpoint:
    """The judge from JUDGE_MODEL / JUDGE_API_BASE / JUDGE_API_KEY."""
    env = os.environ if env is None else env
    return Endpoint(
        model=env.get("JUDGE_MODEL", ""),
        api_base=env.get("JUDGE_API_BASE") or DEFAULT_API_BASE,
        api_key=env.get("JUDGE_API_KEY", ""),
        label="the judge",
        **overrides,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade one answer with the LLM judge.")
    parser.add_argument("--task", required=True, help="a JSON file holding one task")
    parser.add_argument("--answer", required=True, help="the file holding the answer")
    args = parser.parse_args(argv)
    with open(args.task, encoding="utf-8") as handle:
        task = json.load(handle)
    try:
        with open(args.answer, encoding="utf-8", errors="replace") as handle:
            candidate = handle.read()
    except FileNotFoundError:
        candidate = ""
    endpoint = endpoint_from_env()
    if not endpoint.model:
        print("judge: JUDGE_MODEL is not set.", file=sys.stderr)
        return 2
    try:
        verdict = grade(endpoint, task, candidate)
    except (Unreachable, CallFailed) as exc:
        print(f"judge: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"score": verdict["score"], "reason": verdict["reason"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
