"""The task editor's form: rows a page shows, read back from a POST, turned into tasks.

The editor is plain HTML: each task is a row of named fields (`t-0-prompt`, `t-0-kind`,
`t-0-setup-1-path`, …). "Add task", "Remove" and "Add file" are submit buttons whose value
says what to do; the server answers with the editor redrawn (HTMX swaps it in; without
JavaScript it is a whole page). Which verifier fields a row shows follows its kind in CSS.
The task rules stay in harnesses.tasks_format: this module only moves fields.
"""

import json
import re
from dataclasses import dataclass, field

from belvedir.errors import Invalid
from harnesses import tasks_format

MAX_ROWS = 500  # a bound on what a POST may ask the server to draw


@dataclass
class Row:
    id: str = ""
    prompt: str = ""
    answer: str = ""
    kind: str = "judge"
    criteria: str = ""  # one criterion a line
    source: str = ""
    setup: list[tuple[str, str]] = field(default_factory=list)
    golden: list[tuple[str, str]] = field(default_factory=list)
    metadata: str = ""  # JSON text, kept as it came
    error: str = ""

    def file_groups(self) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """What the editor draws for state_diff: at least one (blank) file row each."""
        return [
            ("setup", "Setup file", self.setup or [("", "")]),
            ("golden", "Golden file", self.golden or [("", "")]),
        ]


def rows_from_tasks(tasks: list[dict]) -> list[Row]:
    rows = []
    for task in tasks:
        verifier = task.get("verifier") or {"kind": "judge"}
        rows.append(
            Row(
                id=str(task.get("id", "")),
                prompt=task.get("prompt", ""),
                answer=task.get("answer", ""),
                kind=verifier.get("kind", "judge"),
                criteria="\n".join(verifier.get("criteria") or []),
                source=verifier.get("source", ""),
                setup=list((verifier.get("setup_state") or {}).items()),
                golden=list((verifier.get("golden") or {}).items()),
                metadata=json.dumps(task["metadata"], ensure_ascii=False)
                if task.get("metadata")
                else "",
            )
        )
    return rows


def _count(post, name: str) -> int:
    try:
        return max(0, min(int(post.get(name, 0)), MAX_ROWS))
    except (TypeError, ValueError):
        return 0


def _files(post, prefix: str) -> list[tuple[str, str]]:
    files = []
    for j in range(_count(post, f"{prefix}-count")):
        path = post.get(f"{prefix}-{j}-path", "").strip()
        text = post.get(f"{prefix}-{j}-text", "")
        files.append((path, text.replace("\r\n", "\n")))
    return files


def rows_from_post(post) -> list[Row]:
    rows = []
    for i in range(_count(post, "task-count")):
        p = f"t-{i}-"
        rows.append(
            Row(
                id=post.get(p + "id", "").strip(),
                prompt=post.get(p + "prompt", "").replace("\r\n", "\n"),
                answer=post.get(p + "answer", "").replace("\r\n", "\n"),
                kind=post.get(p + "kind", "judge"),
                criteria=post.get(p + "criteria", "").replace("\r\n", "\n"),
                source=post.get(p + "source", "").replace("\r\n", "\n"),
                setup=_files(post, p + "setup"),
                golden=_files(post, p + "golden"),
                metadata=post.get(p + "metadata", "").strip(),
            )
        )
    return rows


def apply(rows: list[Row], action: str) -> list[Row]:
    """The rows after an editor button: `add`, `remove-N`, `file-N-setup`, `file-N-golden`."""
    if action == "add" and len(rows) < MAX_ROWS:
        return [*rows, Row()]
    match = re.fullmatch(r"remove-(\d+)", action)
    if match:
        index = int(match.group(1))
        return [row for i, row in enumerate(rows) if i != index]
    match = re.fullmatch(r"file-(\d+)-(setup|golden)", action)
    if match and int(match.group(1)) < len(rows):
        row = rows[int(match.group(1))]
        getattr(row, match.group(2)).append(("", ""))
    return rows


def tasks_from_rows(rows: list[Row]) -> list[dict]:
    """The task objects the rows describe, for harnesses.tasks_format to check."""
    tasks = []
    for i, row in enumerate(rows):
        task: dict = {"prompt": row.prompt}
        if row.id:
            task["id"] = row.id
        if row.answer:
            task["answer"] = row.answer
        verifier: dict = {"kind": row.kind}
        if row.kind == "rubric":
            verifier["criteria"] = [c for c in row.criteria.splitlines() if c.strip()]
        elif row.kind == "code":
            verifier["source"] = row.source
        elif row.kind == "state_diff":
            # A file row left blank is not a file.
            verifier["setup_state"] = {path: text for path, text in row.setup if path or text}
            verifier["golden"] = {path: text for path, text in row.golden if path or text}
        task["verifier"] = verifier
        if row.metadata:
            try:
                task["metadata"] = json.loads(row.metadata)
            except ValueError:
                raise Invalid(
                    f"tasks[{i}]: metadata is not valid JSON.", field=f"tasks[{i}].metadata"
                ) from None
        tasks.append(task)
    return tasks


def mark_error(rows: list[Row], exc: Invalid) -> None:
    """Put a task error on its row (`tasks[2].verifier.source` → row 2)."""
    match = re.match(r"tasks\[(\d+)\]", exc.field or "")
    if match and int(match.group(1)) < len(rows):
        rows[int(match.group(1))].error = exc.message


_LABELS = {
    "judge": "Judge (an LLM compares to the answer)",
    "rubric": "Rubric (the judge checks criteria)",
    "code": "Code: verify(answer, state) (Harbor only)",
    "state_diff": "State diff: files vs golden files (Harbor only)",
}
KINDS = [(kind, _LABELS[kind]) for kind in tasks_format.KINDS]
