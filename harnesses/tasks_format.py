"""The task format: what an environment holds, what `BELVEDIR_TASKS_FILE` carries, what the
Harbor export reads (docs/tasks-format.md). The one parser and validator of task sets.

A tasks file is a JSON list of tasks (or `{"tasks": [...]}`), or lines: JSONL (one task object
a line) and plain text (each other non-blank line is a judge task without a recorded answer). A task:

    {"id": "refund-policy", "prompt": "...", "answer": "the recorded answer",
     "verifier": {"kind": "judge"}
               | {"kind": "rubric", "criteria": ["...", ...]}
               | {"kind": "code", "source": "def verify(answer, state): ..."}
               | {"kind": "state_diff", "setup_state": {path: text}, "golden": {path: text}},
     "metadata": {...}}

Only `prompt` is required; `id` defaults to `task-N`, `verifier` to the judge; other top-level
keys are kept under `metadata`. Every error is
an `Invalid` whose message names the task (index and id) and the field, and whose `field` is
the path to it (`tasks[2].verifier.kind`). A `code` task's source is parsed with `ast`, never
run here: it runs only inside a Harbor task container.
"""

import ast
import json
import posixpath
import re

from belvedir.errors import Invalid
from belvedir.text import size_text

MAX_BYTES = 512 * 1024
KINDS = ("judge", "rubric", "code", "state_diff")
TASK_KEYS = ("id", "prompt", "answer", "verifier", "setup", "metadata")
VERIFIER_KEYS = {
    "judge": {"kind"},
    "rubric": {"kind", "criteria"},
    "code": {"kind", "source"},
    "state_diff": {"kind", "setup_state", "golden"},
}
# Ids name Harbor task directories and files: letters, digits, ".", "_", "-".
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
PATH_MAX_CHARS = 255


def size_check(size: int, field: str, *, name: str = "") -> None:
    """A Tasks file (or the field holding one) of `size` bytes is refused past MAX_BYTES."""
    if size > MAX_BYTES:
        raise Invalid(
            f"{name or field} is {size:,} bytes; the limit is {size_text(MAX_BYTES, iec=False)}.",
            field=field,
        )


def parse_tasks(text: str, *, field: str = "tasks") -> list[dict]:
    """The validated tasks of a tasks file (JSON list, JSONL or plain text lines)."""
    if not isinstance(text, str):
        raise Invalid(f"{field} must be text.", field=field)
    size_check(len(text.encode("utf-8")), field)
    stripped = text.strip()
    if not stripped:
        raise Invalid(f"{field} holds no tasks.", field=field)
    if stripped.startswith("["):
        items = _json(stripped, field)
    elif stripped.startswith("{"):
        try:
            document = json.loads(stripped)
        except ValueError:
            items = _lines(text, field)
        else:
            if isinstance(document, dict) and "tasks" in document and "prompt" not in document:
                items = document["tasks"]  # an environment object (validate_tasks: a list)
            else:
                items = [document]
    else:
        items = _lines(text, field)
    return validate_tasks(items, field=field)


def _json(text: str, field: str) -> list:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise Invalid(f"{field} is not valid JSON: {_json_reason(exc)}.", field=field) from None
    return document


def _json_reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _lines(text: str, field: str) -> list:
    """JSONL and plain text, line by line (as the Runner reads them): a line starting with `{`
    is one task object, any other non-blank line a judge task whose prompt is the line."""
    items: list = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            items.append(line)
            continue
        try:
            items.append(json.loads(line))
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise Invalid(
                f"{field} line {number} is not valid JSON (JSONL: one task object a line): "
                f"{reason}.",
                field=field,
            ) from None
    return items


def validate_tasks(items, *, field: str = "tasks") -> list[dict]:
    """The tasks, checked and normalized (`id` filled, `verifier` defaulted to the judge)."""
    if not isinstance(items, list):
        raise Invalid(f"{field} must be a list of tasks.", field=field)
    if not items:
        raise Invalid(f"{field} holds no tasks.", field=field)
    tasks = [_task(item, index, field) for index, item in enumerate(items)]
    seen: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task["id"] in seen:
            raise Invalid(
                f"{field}[{index}] (id {task['id']!r}): id is already used by "
                f"{field}[{seen[task['id']]}]; task ids must be unique.",
                field=f"{field}[{index}].id",
            )
        seen[task["id"]] = index
    size_check(len(dumps(tasks).encode("utf-8")), field)
    return tasks


def dumps(tasks: list[dict]) -> str:
    """Tasks as the JSON a harness's Tasks field and `BELVEDIR_TASKS_FILE` carry."""
    return json.dumps(tasks, indent=2, ensure_ascii=False) + "\n"


class _Task:
    """Where an error is: `tasks[2] (id 'x')`, and the path to the field."""

    def __init__(self, field: str, index: int, task_id: str | None):
        self.where = f"{field}[{index}]"
        self.name = self.where + (f" (id {task_id!r})" if task_id else "")

    def error(self, path: str, message: str) -> Invalid:
        return Invalid(f"{self.name}: {path} {message}", field=f"{self.where}.{path}")


def _task(item, index: int, field: str) -> dict:
    if isinstance(item, str):  # a bare prompt: a judge task without a recorded answer
        item = {"prompt": item}
    if not isinstance(item, dict):
        raise Invalid(
            f"{field}[{index}]: a task must be a JSON object with a prompt.",
            field=f"{field}[{index}]",
        )
    raw_id = item.get("id")
    where = _Task(field, index, str(raw_id) if isinstance(raw_id, str | int) else None)
    task: dict = {"id": _task_id(raw_id, index, where)}
    prompt = item.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise where.error("prompt", "is required: the text the agent is given.")
    task["prompt"] = prompt
    answer = item.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, str | int | float | type(None)):
        raise where.error("answer", "must be text: the recorded answer.")
    if answer is not None:
        task["answer"] = str(answer)
    task["verifier"] = _verifier(item.get("verifier"), where)
    if item.get("setup") is not None:
        _setup(item["setup"], task["verifier"], item.get("verifier"), where)
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise where.error("metadata", "must be a JSON object.")
    # Keys the format does not define are optional metadata: kept under `metadata` (a key
    # already there wins), as the Runner reads them.
    extra = {key: value for key, value in item.items() if key not in TASK_KEYS}
    if extra or metadata is not None:
        task["metadata"] = {**extra, **(metadata or {})}
        group = task["metadata"].get("group")
        if isinstance(group, bool) or not isinstance(group, str | int | float | type(None)):
            raise where.error("metadata.group", "must be text: the name of the task's group.")
    return task


def _task_id(raw_id, index: int, where: _Task) -> str:
    if raw_id is None or raw_id == "":
        return f"task-{index + 1}"
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise where.error("id", "must be text.")
    task_id = str(raw_id)
    if not _ID.match(task_id):
        raise where.error(
            "id",
            "must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit (it names the task's directory in a Harbor export).",
        )
    return task_id


def _verifier(verifier, where: _Task) -> dict:
    if verifier is None:
        return {"kind": "judge"}
    if not isinstance(verifier, dict):
        raise where.error("verifier", 'must be an object such as {"kind": "judge"}.')
    kind = verifier.get("kind")
    if kind not in KINDS:
        raise where.error("verifier.kind", f"{kind!r} is not one of {', '.join(KINDS)}.")
    unknown = sorted(set(verifier) - VERIFIER_KEYS[kind])
    if unknown:
        allowed = ", ".join(sorted(VERIFIER_KEYS[kind]))
        raise where.error(
            f"verifier.{unknown[0]}", f"is not a field of a {kind} verifier (fields: {allowed})."
        )
    if kind == "rubric":
        return {"kind": kind, "criteria": _criteria(verifier.get("criteria"), where)}
    if kind == "code":
        return {"kind": kind, "source": _source(verifier.get("source"), where)}
    if kind == "state_diff":
        setup = _files(verifier.get("setup_state"), "verifier.setup_state", where, required=False)
        golden = _files(verifier.get("golden"), "verifier.golden", where, required=True)
        return {"kind": kind, "setup_state": setup, "golden": golden}
    return {"kind": kind}


def _setup(setup, verifier: dict, given, where: _Task) -> None:
    """A task's `setup.state` (the documented spelling): the files placed under /app/state
    before the agent runs, a state_diff task's; kept as its verifier's `setup_state` (the
    alias), which it must not repeat."""
    if not isinstance(setup, dict):
        raise where.error("setup", 'must be an object such as {"state": {path: text}}.')
    unknown = sorted(set(setup) - {"state"})
    if unknown:
        raise where.error(f"setup.{unknown[0]}", "is not a field of setup (fields: state).")
    if "state" not in setup:
        return
    if verifier["kind"] != "state_diff":
        raise where.error(
            "setup.state",
            f"places files for a state_diff task; this task's verifier is {verifier['kind']}.",
        )
    if isinstance(given, dict) and given.get("setup_state") is not None:
        raise where.error(
            "setup.state", "and verifier.setup_state both give the setup files: keep one."
        )
    verifier["setup_state"] = _files(setup["state"], "setup.state", where, required=False)


def _criteria(criteria, where: _Task) -> list[str]:
    if not isinstance(criteria, list) or not criteria:
        raise where.error("verifier.criteria", "must be a non-empty list of criteria (text).")
    for number, criterion in enumerate(criteria):
        if not isinstance(criterion, str) or not criterion.strip():
            raise where.error(f"verifier.criteria[{number}]", "must be non-empty text.")
    return [c.strip() for c in criteria]


def _source(source, where: _Task) -> str:
    if not isinstance(source, str) or not source.strip():
        raise where.error("verifier.source", "is required: Python defining verify(answer, state).")
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise where.error(
            "verifier.source", f"is not valid Python: {exc.msg} (line {exc.lineno})."
        ) from None
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "verify":
            args = node.args
            positional = len(args.posonlyargs) + len(args.args)
            required_kw = [
                a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None
            ]
            if positional == 2 and not required_kw:
                return source
            raise where.error(
                "verifier.source",
                "defines verify with the wrong parameters: it must be verify(answer, state).",
            )
    raise where.error(
        "verifier.source", "must define verify(answer, state) at the top level of the module."
    )


def safe_path(path) -> str | None:
    """Why `path` is not a safe relative file path, or None when it is."""
    if not isinstance(path, str) or not path:
        return "is empty"
    if len(path) > PATH_MAX_CHARS:
        return f"is longer than {PATH_MAX_CHARS} characters"
    if "\\" in path or "\x00" in path or any(ord(c) < 32 for c in path):
        return "holds a backslash or a control character"
    if path.startswith("/"):
        return "is absolute; paths are relative to the state directory"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts) or posixpath.normpath(path) != path:
        return "must be a plain relative path (no '..', '.', or empty parts)"
    return None


def _files(files, name: str, where: _Task, *, required: bool) -> dict[str, str]:
    if files is None and not required:
        return {}
    if not isinstance(files, dict) or (required and not files):
        what = "a non-empty object" if required else "an object"
        raise where.error(name, f"must be {what} of relative path → file text.")
    for path, text in files.items():
        reason = safe_path(path)
        if reason:
            raise where.error(f"{name}[{path!r}]", f"path {reason}.")
        if not isinstance(text, str):
            raise where.error(f"{name}[{path!r}]", "must be the file's text.")
    paths = sorted(files)
    for first, second in zip(paths, paths[1:], strict=False):
        if second.startswith(first + "/"):
            raise where.error(f"{name}[{second!r}]", f"path is inside {first!r}, which is a file.")
    return dict(files)
