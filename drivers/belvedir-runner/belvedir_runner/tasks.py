"""Read a tasks file (docs/tasks-format.md): a JSON list, an environment object, or lines
(JSONL and plain-text prompts). Bad input raises TasksError naming the task and the field."""

from __future__ import annotations

import ast
import json
import re

MAX_BYTES = 512 * 1024
KINDS = ("judge", "rubric", "code", "state_diff")
HARBOR_ONLY = ("code", "state_diff")
TASK_KEYS = ("id", "prompt", "answer", "verifier", "setup", "metadata")
VERIFIER_KEYS = {
    "judge": {"kind"},
    "rubric": {"kind", "criteria"},
    "code": {"kind", "source"},
    "state_diff": {"kind", "setup_state", "golden"},
}
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class TasksError(ValueError):
    """The tasks file is unusable; the message names the task and the field."""


def parse_text(text: str) -> list[dict]:
    """The tasks in `text`, normalised: every task has id, prompt, answer (str or None),
    verifier (with kind) and metadata."""
    size = len(text.encode("utf-8"))
    if size > MAX_BYTES:
        raise TasksError(f"tasks is {size:,} bytes; the limit is 512 KB.")
    stripped = text.strip()
    if stripped.startswith("["):
        raw = _loads(stripped, "tasks")
        if not isinstance(raw, list):
            raise TasksError("tasks: the JSON must be a list of tasks.")
        items = raw
    elif stripped.startswith("{") and _object(stripped) is not None:
        items = _object(stripped)
    else:
        items = []
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if not line:
                continue
            items.append(_loads(line, f"tasks: line {number}") if line.startswith("{") else line)
    tasks = [_task(item, position) for position, item in enumerate(items, start=1)]
    if not tasks:
        raise TasksError("tasks: the file holds no task.")
    seen: dict[str, int] = {}
    for position, task in enumerate(tasks, start=1):
        if task["id"] in seen:
            raise TasksError(
                f"task {position}: id {task['id']!r} is used by task {seen[task['id']]}."
            )
        seen[task["id"]] = position
    return tasks


def _loads(text: str, where: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise TasksError(f"{where} is not valid JSON: {exc}.") from None


def _object(text: str) -> list | None:
    """The tasks of a text that is one JSON object: an environment's, or the one task."""
    try:
        document = json.loads(text)
    except ValueError:
        return None  # JSONL
    if isinstance(document, dict) and "prompt" not in document and "tasks" in document:
        if not isinstance(document["tasks"], list):
            raise TasksError("tasks: the environment's tasks must be a list.")
        return document["tasks"]
    return [document]


def _task(item, position: int) -> dict:
    if isinstance(item, str):
        item = {"prompt": item}
    if not isinstance(item, dict):
        raise TasksError(f"task {position}: must be an object or a string.")
    raw_id = item.get("id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raw_id = str(raw_id)
    if raw_id is None or raw_id == "":
        raw_id = None
        task_id = f"task-{position}"
    elif not isinstance(raw_id, str) or not _ID.match(raw_id):
        raise TasksError(
            f"task {position}: id {raw_id!r} may hold only letters, digits, '.', '_' and '-' "
            "(1 to 100, starting with a letter or digit)."
        )
    else:
        task_id = raw_id
    name = f"task {task_id}" if raw_id is not None else f"task {position}"
    prompt = item.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TasksError(f"{name}: prompt is required.")
    answer = item.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = str(answer)
    if answer is not None and not isinstance(answer, str):
        raise TasksError(f"{name}: answer must be a string.")
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise TasksError(f"{name}: metadata must be an object.")
    verifier = item.get("verifier", {"kind": "judge"})
    if not isinstance(verifier, dict):
        raise TasksError(f"{name}: verifier must be an object.")
    setup = item.get("setup")
    if setup is not None and verifier.get("kind") != "state_diff":
        # setup.state places a state_diff task's files (docs/tasks-format.md); never metadata.
        raise TasksError(
            f"{name}: setup.state places files for a state_diff task; this task's verifier is "
            f"{verifier.get('kind')}."
        )
    # Keys the format does not define are optional metadata (a key in `metadata` wins).
    metadata = {
        **{key: value for key, value in item.items() if key not in TASK_KEYS},
        **(metadata or {}),
    }
    group = metadata.get("group")
    if isinstance(group, bool) or not isinstance(group, str | int | float | type(None)):
        raise TasksError(f"{name}: metadata.group must be text, the name of the task's group.")
    return {
        "id": task_id,
        "prompt": prompt,
        "answer": answer,
        "verifier": _verifier(verifier, name),
        "metadata": metadata,
    }


def _verifier(verifier: dict, name: str) -> dict:
    kind = verifier.get("kind")
    if kind not in KINDS:
        raise TasksError(f"{name}: verifier.kind {kind!r} is not one of {', '.join(KINDS)}.")
    unknown = sorted(set(verifier) - VERIFIER_KEYS[kind])
    if unknown:
        raise TasksError(
            f"{name}: verifier.{unknown[0]} is not a field of a {kind} verifier "
            f"(fields: {', '.join(sorted(VERIFIER_KEYS[kind]))})."
        )
    if kind == "rubric":
        criteria = verifier.get("criteria")
        if (
            not isinstance(criteria, list)
            or not criteria
            or not all(isinstance(c, str) and c.strip() for c in criteria)
        ):
            raise TasksError(f"{name}: verifier.criteria must be a non-empty list of strings.")
    if kind == "code":
        source = verifier.get("source")
        if not isinstance(source, str) or not _defines_verify(source):
            raise TasksError(f"{name}: verifier.source must define verify(answer, state).")
    if kind == "state_diff":
        golden = verifier.get("golden")
        if not isinstance(golden, dict) or not golden:
            raise TasksError(f"{name}: verifier.golden must be a non-empty object of path → text.")
        setup = verifier.get("setup_state", {})
        if not isinstance(setup, dict):
            raise TasksError(f"{name}: verifier.setup_state must be an object of path → text.")
        for key, files in (("golden", golden), ("setup_state", setup)):
            for path, content in files.items():
                if not _relative(path):
                    raise TasksError(
                        f'{name}: verifier.{key} path "{path}" must be relative, without "..".'
                    )
                if not isinstance(content, str):
                    raise TasksError(f'{name}: verifier.{key}["{path}"] must be text.')
    return dict(verifier)


def _defines_verify(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "verify"
        for node in tree.body
    )


def _relative(path: str) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))
