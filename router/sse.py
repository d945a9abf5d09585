"""Reading an OpenAI stream as it passes through: the model, the text, the finish reason and the
usage (which `stream_options.include_usage` puts in the last chunk)."""

import json

from billing.pricing import text_tokens


class StreamReader:
    def __init__(self):
        self._pending = b""
        self.model = ""
        self._parts: list[str] = []
        self.content_chunks = 0
        self.finish_reason = ""
        self.usage: dict | None = None
        self.done = False  # the `data: [DONE]` line came

    def feed(self, chunk: bytes) -> None:
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        if not data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        if event.get("model") and not self.model:
            self.model = str(event["model"])
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str) and content:
                self._parts.append(content)
                self.content_chunks += 1
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def output_tokens_estimate(self) -> int:
        """Tokens that came through, when the upstream could not say: at least one a chunk."""
        return max(self.content_chunks, text_tokens(self.text))
