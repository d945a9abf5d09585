"""Reading a stream of server-sent events as it passes through: the model, the text, the
finish reason and the usage. `EventReader` parses the `data:` lines; each API's reader
(`router.endpoints`) reads its own events. `StreamReader` reads OpenAI's chat completion
chunks (the usage is in the last chunk, which `stream_options.include_usage` asks for)."""

import json

from billing.pricing import Usage, chat_usage, text_tokens


class EventReader:
    """The JSON events of an SSE stream, fed as its bytes arrive; `event` reads each one."""

    def __init__(self):
        self._pending = b""
        self.model = ""
        self._parts: list[str] = []
        self.content_chunks = 0
        self.finish_reason = ""
        self.done = False  # the stream's own end came (OpenAI's `data: [DONE]`)

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
        if isinstance(event, dict):
            self.event(event)

    def event(self, event: dict) -> None:
        raise NotImplementedError

    def text_part(self, text) -> None:
        if isinstance(text, str) and text:
            self._parts.append(text)
            self.content_chunks += 1

    def reported_usage(self) -> Usage | None:
        """The usage as the upstream reported it, or None when it did not (yet)."""
        raise NotImplementedError

    def input_usage(self) -> Usage | None:
        """The input's usage, when the upstream reported it before the rest (Anthropic's
        `message_start`): what a stream cut short is settled from. None by default."""
        return None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def output_tokens_estimate(self) -> int:
        """Tokens that came through, when the upstream could not say: at least one a chunk."""
        return max(self.content_chunks, text_tokens(self.text))


class StreamReader(EventReader):
    """OpenAI's chat completion chunks (and its legacy completions', whose choices carry
    `text`)."""

    def __init__(self):
        super().__init__()
        self.usage: dict | None = None

    def event(self, event: dict) -> None:
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        if event.get("model") and not self.model:
            self.model = str(event["model"])
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            self.text_part(delta.get("content") if isinstance(delta, dict) else None)
            self.text_part(choice.get("text"))
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def reported_usage(self) -> Usage | None:
        return chat_usage(self.usage)
