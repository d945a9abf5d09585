"""A run's log tail: the last 16 KB of its output, secrets redacted, and the exact size of it all."""

from __future__ import annotations

import codecs
import threading
from collections import deque
from collections.abc import Iterable

from runs.contract import (
    LOG_TAIL_BYTES,
    RUN_STAGE_LINE,
    SPANS_DROPPED,
    clip_log_tail,
    redact_text,
    secrets_for_redaction,
)


class LogTail:
    """The last `limit` bytes of output with secrets redacted, and the count of characters
    ever output.

    A ring of the latest pieces, trimmed from the front as output arrives, so a flood costs
    the same per byte as a trickle and `size` counts every character. Secrets are redacted
    as the output arrives, so `size` counts the redacted stream and the log API's offsets
    stay true. The end of a chunk that could be the start of a secret is held back until the
    next chunk shows whether it is one, so half a secret split across two chunks never shows.
    """

    def __init__(self, secrets: list[str], limit: int = LOG_TAIL_BYTES):
        self.secrets = secrets_for_redaction(secrets)
        self.limit = limit
        self._pieces: deque[str] = deque()  # the redacted output's end, >= limit characters
        self._kept = 0  # characters in _pieces
        self._pending = ""  # the end of the output that may be the start of a secret
        self.size = 0
        self.lock = threading.Lock()
        self.dirty = False
        self.run_started = False  # the entrypoint's RUN_STAGE_LINE went by
        self._recent = "\n"  # the end of the output, enough to find that line across chunks
        self.spans_dropped = False  # the SDK or a driver said SPANS_DROPPED
        self._recent_spans = ""  # the end of the output, enough to find that across chunks

    def _held(self, text: str) -> int:
        """How many characters at the end of `text` begin some secret."""
        longest = max((len(s) for s in self.secrets), default=1) - 1
        for n in range(min(longest, len(text)), 0, -1):
            if any(secret.startswith(text[-n:]) for secret in self.secrets):
                return n
        return 0

    def _add(self, text: str) -> None:
        if not text:
            return
        self.size += len(text)
        if not self.run_started:
            line = f"\n{RUN_STAGE_LINE}\n"
            window = self._recent + text
            self.run_started = line in window
            self._recent = window[-(len(line) - 1) :]
        if not self.spans_dropped:
            window = self._recent_spans + text
            self.spans_dropped = SPANS_DROPPED in window
            self._recent_spans = window[-(len(SPANS_DROPPED) - 1) :]
        piece = text[-self.limit :]  # a character is at least a byte: enough for the tail
        self._pieces.append(piece)
        self._kept += len(piece)
        while self._kept - len(self._pieces[0]) >= self.limit:
            self._kept -= len(self._pieces.popleft())

    def write(self, chunk: str) -> None:
        with self.lock:
            text = self.redact(self._pending + chunk)
            held = self._held(text)
            self._pending = text[len(text) - held :] if held else ""
            self._add(text[: len(text) - held])
            self.dirty = True

    def close(self) -> None:
        """The output ended: what was held back is just text."""
        with self.lock:
            self._add(self._pending)
            self._pending = ""
            self.dirty = True

    def text(self) -> str:
        with self.lock:
            return clip_log_tail("".join(self._pieces), self.limit)

    def redact(self, text: str) -> str:
        return redact_text(text, self.secrets)


def pump(chunks: Iterable[bytes], tail: LogTail) -> None:
    """Decode `chunks` into `tail` to the very end of the stream, then close the tail.

    A character split across two chunks stays whole; bytes that are not UTF-8 become U+FFFD.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        for chunk in chunks:
            tail.write(decoder.decode(chunk))
    finally:
        tail.write(decoder.decode(b"", final=True))
        tail.close()
