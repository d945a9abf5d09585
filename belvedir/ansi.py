"""Terminal escape codes in a run's log: colours as HTML for the run page, nothing at all in
the downloaded text. Harnesses print what a terminal shows (pytest, pip, rich progress bars);
a page shows `\\x1b[31m` as "[31m" noise.

Only SGR (`ESC [ … m`) colours and weights are kept, as classes (`ansi-fg-1`, `ansi-bold`;
the Content-Security-Policy allows no style attributes), for the 16 basic colours; any other
escape sequence (cursor moves, erasing a line, window titles, 256-colour and true colours)
is dropped.
"""

from __future__ import annotations

import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# CSI (ESC [ params intermediates final), OSC (ESC ] … BEL or ESC \), and the short
# two-character escapes (ESC ( B, ESC =, ESC 7 …); a lone ESC at the very end.
ESCAPE = re.compile(
    r"\x1b\[(?P<params>[0-?]*)[ -/]*(?P<final>[@-~])"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x1b$"
)
# The C1 form of CSI (a single U+009B) and other control characters a page shows as boxes;
# \t, \n and \r stay.
CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")


def plain_text(text: str) -> str:
    """The text without escape sequences: what a terminal would have shown, uncoloured."""
    return CONTROLS.sub("", ESCAPE.sub("", text))


class _Style:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.fg: int | None = None
        self.bg: int | None = None
        self.bold = self.dim = self.italic = self.underline = False

    def apply(self, params: str) -> None:
        codes = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else [0]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code == 0:
                self.reset()
            elif code == 1:
                self.bold = True
            elif code == 2:
                self.dim = True
            elif code == 3:
                self.italic = True
            elif code == 4:
                self.underline = True
            elif code == 22:
                self.bold = self.dim = False
            elif code == 23:
                self.italic = False
            elif code == 24:
                self.underline = False
            elif 30 <= code <= 37:
                self.fg = code - 30
            elif 90 <= code <= 97:
                self.fg = code - 90 + 8
            elif code == 39:
                self.fg = None
            elif 40 <= code <= 47:
                self.bg = code - 40
            elif 100 <= code <= 107:
                self.bg = code - 100 + 8
            elif code == 49:
                self.bg = None
            elif code in (38, 48):  # 256 colours (5;n) or true colour (2;r;g;b): skipped
                i += 2 if codes[i + 1 : i + 2] == [5] else 4
                if code == 38:
                    self.fg = None
                else:
                    self.bg = None
            i += 1

    def classes(self) -> str:
        names = []
        if self.fg is not None:
            names.append(f"ansi-fg-{self.fg}")
        if self.bg is not None:
            names.append(f"ansi-bg-{self.bg}")
        names += [n for n in ("bold", "dim", "italic", "underline") if getattr(self, n)]
        return " ".join(n if n.startswith("ansi-") else f"ansi-{n}" for n in names)


def as_html(text: str) -> SafeString:
    """The text escaped for HTML, its SGR colours as `<span class="ansi-…">`; nothing else of
    any escape sequence shows."""
    style = _Style()
    out: list[str] = []
    position = 0

    def emit(piece: str) -> None:
        piece = CONTROLS.sub("", piece)
        if not piece:
            return
        classes = style.classes()
        out.append(f'<span class="{classes}">{escape(piece)}</span>' if classes else escape(piece))

    for match in ESCAPE.finditer(text):
        emit(text[position : match.start()])
        position = match.end()
        if match.group("final") == "m":
            style.apply(match.group("params"))
    emit(text[position:])
    return mark_safe("".join(out))
