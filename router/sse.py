"""Reading a stream of server-sent events as it passes through: the model, the text, the
finish reason and the usage. `EventReader` parses the `data:` lines; each API's reader
(`router.endpoints`) reads its own events. `StreamReader` reads OpenAI's chat completion
chunks (the usage is in the last chunk, which `stream_options.include_usage` asks for).

Its state is bounded, whatever the stream (a user's base may send anything, and the router
serves every run): a line past `MAX_LINE_BYTES` is dropped unread, and past `MAX_TEXT_CHARS`
of text (what a span keeps of a value, `traces.otlp.MAX_VALUE_CHARS`) the rest is only
counted, for the output's estimate."""

import json

from billing.pricing import Usage, chat_usage, text_tokens

MAX_LINE_BYTES = 2**20
MAX_TEXT_CHARS = 1_000_000


class EventReader:
    """The JSON events of an SSE stream, fed as its bytes arrive; `event` reads each one."""

    def __init__(self):
        self._pending = bytearray()  # the line so far, when the last chunk ended inside one
        self._overlong = False  # the line so far went past MAX_LINE_BYTES: dropped
        self.model = ""
        self._parts: list[str] = []
        self._kept_chars = 0
        self._dropped_tokens = 0  # of the text past MAX_TEXT_CHARS
        self.content_chunks = 0
        self.finish_reason = ""
        self.done = False  # the stream's own end came (OpenAI's `data: [DONE]`)

    def feed(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if lines:  # the pending line ends in this chunk
            if self._overlong:
                lines[0], self._overlong = b"", False
            elif self._pending:
                lines[0] = bytes(self._pending) + lines[0]
            self._pending.clear()
            for line in lines:
                self._line(line.strip())
        if rest and not self._overlong:
            if len(self._pending) + len(rest) > MAX_LINE_BYTES:
                self._pending.clear()
                self._overlong = True
            else:
                self._pending += rest

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
            self.content_chunks += 1
            if self._kept_chars + len(text) > MAX_TEXT_CHARS:
                self._dropped_tokens += text_tokens(text)
                return
            self._parts.append(text)
            self._kept_chars += len(text)

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
        return max(self.content_chunks, text_tokens(self.text) + self._dropped_tokens)


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
