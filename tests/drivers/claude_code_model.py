"""A scripted Anthropic-shaped provider for the real Claude Code: a local Messages API on
127.0.0.1 (tests/router/fake_upstream.py) answering what Claude Code sends, whole or streamed.

- the task (a request whose messages carry the exported instruction, with Claude Code's tools):
  one `tool_use` of its Write tool writing ANSWER to the task's answer file (its Bash tool,
  should a version have no Write);
- the tool's result (a request carrying a `tool_result`): a closing text, `end_turn`;
- anything else Claude Code asks on the side (a title, a quota probe): a short text.

Every request is kept as FakeUpstream keeps it (`requests`, `seen`, `headers`);
`on_tool_result(body)`, when set, runs before the tool's result is answered, while Claude Code
waits in its task container (the test looks into the container then).

    with ClaudeCodeModel() as provider:
        ... model_api_base=provider.base_url ...
"""

import json
import threading

from harnesses.harbor_export import ANSWER_PATH
from tests.router.fake_upstream import FakeUpstream

ANSWER = "4"
CLOSING = f"I wrote the answer to {ANSWER_PATH}."
INPUT_TOKENS = 900  # what it reports for every prompt


def _has_tool_result(body: dict) -> bool:
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") == "tool_result" for part in content
        ):
            return True
    return False


def _tool_names(body: dict) -> set[str]:
    return {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}


class ClaudeCodeModel(FakeUpstream):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_tool_result = None
        self.tool_uses: list[dict] = []  # the tool_use blocks it answered with
        self._uses = 0
        self._script = threading.Lock()

    def reply(self, body: dict) -> tuple[list[dict], str]:
        """(content blocks, stop reason) for a request body."""
        if _has_tool_result(body):
            if self.on_tool_result is not None:
                self.on_tool_result(body)
            return [{"type": "text", "text": CLOSING}], "end_turn"
        tools = _tool_names(body)
        if ANSWER_PATH in json.dumps(body.get("messages")) and tools & {"Write", "Bash"}:
            with self._script:
                self._uses += 1
                number = self._uses
            if "Write" in tools:
                name, arguments = "Write", {"file_path": ANSWER_PATH, "content": ANSWER + "\n"}
            else:
                command = f"printf '%s\\n' {ANSWER} > {ANSWER_PATH}"
                name, arguments = "Bash", {"command": command, "description": "Write the answer"}
            use = {
                "type": "tool_use",
                "id": f"toolu_{number:02d}",
                "name": name,
                "input": arguments,
            }
            self.tool_uses.append(use)
            return [use], "tool_use"
        return [{"type": "text", "text": "OK."}], "end_turn"

    def message(self, body: dict, words: list[str], usage: dict) -> dict:
        blocks, stop = self.reply(body)
        return {
            "id": f"msg_fake_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {**_input_usage(), "output_tokens": _output_tokens(blocks)},
        }

    def message_events(self, body: dict, words: list[str], usage: dict) -> list:
        document = self.message(body, words, usage)
        blocks = document["content"]
        start = {**document, "content": [], "stop_reason": None}
        start["usage"] = {**_input_usage(), "output_tokens": 1}
        events = [("message_start", {"type": "message_start", "message": start})]
        for index, block in enumerate(blocks):
            events += _block_events(index, block)
        stop = {"stop_reason": document["stop_reason"], "stop_sequence": None}
        final = {"output_tokens": document["usage"]["output_tokens"]}
        events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": final}))
        events.append(("message_stop", {"type": "message_stop"}))
        return events


def _input_usage() -> dict:
    return {
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _output_tokens(blocks: list[dict]) -> int:
    return sum(len(json.dumps(block).split()) for block in blocks)


def _block_events(index: int, block: dict) -> list[tuple[str, dict]]:
    """A content block as Anthropic streams it: its start (a tool_use with empty input), its
    delta (the text, or the input as JSON), its stop."""
    if block["type"] == "tool_use":
        opened = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        opened = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    return [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]
