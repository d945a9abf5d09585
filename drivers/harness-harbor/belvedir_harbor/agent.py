"""The Belvedir Harbor agent: asks MODEL through MODEL_API_BASE (OpenAI-compatible) and writes
its answer to /app/answer.md in the task's container, where the task's verifier reads it. With
BELVEDIR_AGENT_URL set, it posts the task to that service instead (BELVEDIR_AGENT_TOKEN as the
bearer) and writes what the service answers.

    harbor run -p ./env -a belvedir_harbor.agent:BelvedirAgent -m openai/gpt-4.1-mini -y

Harbor imports it in its own interpreter (PYTHONPATH must hold this repository). It only writes
an answer: `state_diff` tasks need an agent that edits files (OpenCode, Claude Code, ...).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from belvedir_harbor import __version__

ANSWER_PATH = "/app/answer.md"
DEFAULT_API_BASE = "https://openrouter.ai/api/v1"
SYSTEM_PROMPT = "Answer the task. Give your final answer in full; it is graded as written."
RETRY_STATUSES = {429, 500, 502, 503, 504}


class BelvedirAgent(BaseAgent):
    """One model call per task; the reply is the answer."""

    @staticmethod
    def name() -> str:
        return "belvedir"

    def version(self) -> str:
        return __version__

    async def setup(self, environment: BaseEnvironment) -> None:
        return

    def _setting(self, name: str, default: str = "") -> str:
        return self._extra_env.get(name) or os.environ.get(name) or default

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        agent_url = self._setting("BELVEDIR_AGENT_URL")
        if agent_url:  # a production agent as a service answers instead of a model
            answer, usage = ask_service(
                agent_url, self._setting("BELVEDIR_AGENT_TOKEN"), instruction
            )
            model, api_base = "", agent_url
        else:
            model = self.model_name or self._setting("MODEL")
            if not model:
                raise ValueError("BelvedirAgent needs a model: -m MODEL or the MODEL variable.")
            api_base = self._setting("MODEL_API_BASE", DEFAULT_API_BASE)
            answer, usage = chat(
                api_base, self._setting("MODEL_API_KEY"), model, instruction, self.logger
            )
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "answer.md"
            local.write_text(answer, encoding="utf-8")
            await environment.exec(f"mkdir -p {os.path.dirname(ANSWER_PATH)}")
            await environment.upload_file(local, ANSWER_PATH)
        context.n_input_tokens = usage.get("prompt_tokens")
        context.n_output_tokens = usage.get("completion_tokens")
        context.metadata = {"model": model, "api_base": api_base}


def ask_service(url: str, token: str, prompt: str) -> tuple[str, dict]:
    """POST the task as JSON ({"prompt"}) to BELVEDIR_AGENT_URL, bearer BELVEDIR_AGENT_TOKEN;
    the answer is the reply's `answer` (or `output`, `content`, `text`), else its text."""
    document = post(url, token, {"prompt": prompt}, "the agent service")
    if isinstance(document, dict):
        for key in ("answer", "output", "content", "text"):
            if isinstance(document.get(key), str):
                usage = document.get("usage") if isinstance(document.get("usage"), dict) else {}
                return document[key], usage
        raise RuntimeError(f"the agent service at {url} answered without an answer field")
    return str(document), {}


def chat(api_base: str, api_key: str, model: str, prompt: str, logger=None, tries: int = 5):
    """One OpenAI-compatible chat completion: (reply, usage). Retries 429/5xx with backoff."""
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ],
    }
    url = api_base.rstrip("/") + "/chat/completions"
    document = post(url, api_key, body, "the model", logger, tries)
    reply = document["choices"][0]["message"].get("content") or ""
    return str(reply), document.get("usage") or {}


def post(url: str, token: str, body: dict, what: str, logger=None, tries: int = 5):
    """POST JSON with a bearer token: the reply (JSON, else text). Retries 429/5xx."""
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for attempt in range(tries):
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                text = response.read().decode("utf-8", "replace")
            try:
                return json.loads(text)
            except ValueError:
                return text
        except urllib.error.HTTPError as exc:
            if exc.code not in RETRY_STATUSES or attempt == tries - 1:
                raise RuntimeError(f"{what} at {url} answered HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            if attempt == tries - 1:
                raise RuntimeError(f"{what} at {url} is unreachable: {exc.reason}") from None
        if logger:
            logger.info("%s call failed, retrying (%d/%d)", what, attempt + 1, tries)
        time.sleep(2**attempt)
    raise RuntimeError(f"{what} at {url} did not answer")  # not reached: the last try raises
