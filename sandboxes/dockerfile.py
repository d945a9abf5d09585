"""A Dockerfile read as Docker reads it: its instructions (parser directives, comments,
continuations and a RUN's heredocs), its variables expanded, an ARG's default, an
instruction's exec form. No Docker, no Django: the task-image builder (`taskbuild`) and its
policy (`taskpolicy`) read Dockerfiles with it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_VAR = re.compile(r"\\\$|\$(?:\{(\w+)(?::([-+])([^}]*))?\}|(\w+))")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    rest: str
    text: str  # as written, continuations joined
    heredocs: tuple[tuple[str, str], ...] = ()  # (name, body) of each `<<NAME` of a RUN


# A heredoc's opening word (BuildKit's, for RUN, COPY and ADD): `<<NAME`, `<<-NAME` (tabs
# stripped), `<<"NAME"` / `<<'NAME'`; not a here-string (`<<<`) nor a shift (`1<<2`).
HEREDOC = re.compile(r"(?:^|(?<=\s))\d*<<(-?)([\"']?)([A-Za-z_][\w.-]*)\2(?=\s|$)")


_WHITESPACE = re.compile(r"[ \t\v\f\r]+")


def escape_of(dockerfile: str) -> str:
    """The Dockerfile's escape character (its `# escape=` directive, else a backslash)."""
    for line in dockerfile.splitlines():
        match = re.match(r"^#\s*(\w+)\s*=\s*(\S+)\s*$", line)
        if not match:
            break
        if match.group(1).lower() == "escape":
            return match.group(2)
    return "\\"


def parse(dockerfile: str) -> list[Instruction]:
    """The Dockerfile's instructions as Docker reads them: parser directives, comments and
    blank lines dropped; continuation lines joined (the escape character and the line break
    removed, nothing added; comment and empty lines inside skipped); the bodies of a RUN's
    heredocs collected."""
    lines = dockerfile.splitlines()
    escape, body = "\\", 0
    while body < len(lines):
        match = re.match(r"^#\s*(\w+)\s*=\s*(\S+)\s*$", lines[body])
        if not match:
            break
        if match.group(1).lower() == "escape":
            escape = match.group(2)
        body += 1
    continued = re.compile(re.escape(escape) + r"[ \t]*$")
    found: list[Instruction] = []
    rows = iter(lines[body:])
    for line in rows:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        while continued.search(text):
            text = continued.sub("", text)
            following = next(rows, None)
            while following is not None and (
                not following.strip() or following.lstrip().startswith("#")
            ):
                following = next(rows, None)
            if following is None:
                break
            text += following.rstrip("\r\n")
        text = text.strip()
        # The keyword ends at any whitespace, as Docker's parser splits it (a tab too).
        keyword, _, rest = _WHITESPACE.sub(" ", text, count=1).partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        heredocs: list[tuple[str, str]] = []
        if keyword in ("RUN", "COPY", "ADD"):
            for match in HEREDOC.finditer(rest):
                strip_tabs, name = match.group(1) == "-", match.group(3)
                content: list[str] = []
                for row in rows:
                    row = row.lstrip("\t") if strip_tabs else row
                    if row == name:
                        break
                    content.append(row + "\n")
                heredocs.append((name, "".join(content)))
        found.append(Instruction(keyword, rest, text, tuple(heredocs)))
    return found


def expand(text: str, values: dict[str, str]) -> str:
    """`$name`, `${name}`, `${name:-word}` and `${name:+word}` as a Dockerfile means them."""

    def one(match: re.Match) -> str:
        if match.group(0) == "\\$":
            return "$"
        value = values.get(match.group(1) or match.group(4) or "", "")
        if match.group(2) == "-":
            return value or match.group(3)
        if match.group(2) == "+":
            return match.group(3) if value else ""
        return value

    return _VAR.sub(one, text)


def arg(rest: str) -> tuple[str, str | None]:
    name, equals, default = rest.partition("=")
    return name.strip(), (default.strip().strip('"') if equals else None)


def json_list(text: str) -> list[str] | None:
    """An instruction's exec form (a JSON list of strings); None for the shell form."""
    try:
        value = json.loads(text) if text.startswith("[") else None
    except ValueError:
        return None
    ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
    return value if ok else None


def leading_flags(rest: str) -> tuple[list[str], str]:
    """An instruction's `--flag` words at its start, and what follows them."""
    flags: list[str] = []
    rest = rest.strip()
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.strip()
    return flags, rest
