"""The Harbor export: an environment's tasks as a Harbor dataset, one task directory per task.

A pure function of the tasks (docs/tasks-format.md) and a few options, so the CLI, the API's
zip download and the tests all write the same bytes. Each task directory holds:

    <task id>/instruction.md         the prompt, then the line naming /app/answer.md
    <task id>/task.toml              Harbor's task config (harbor.models.task.config.TaskConfig)
    <task id>/environment/Dockerfile FROM the base image (a setting); /app, /app/state
    <task id>/environment/state/...  a state_diff task's setup_state, copied to /app/state
    <task id>/tests/test.sh          runs tests/grade.py: writes /logs/verifier/reward.txt
    <task id>/tests/task.json        the task as the grader reads it
    <task id>/tests/judge.py         judge and rubric: the Runner's own judge, copied verbatim
    <task id>/tests/verify.py        code: the task's verify(answer, state) source, verbatim
    <task id>/solution/solve.sh      writes the recorded answer (and the golden state)

The judge's key is never written: task.toml's `[verifier.env]` reads JUDGE_API_KEY (and
JUDGE_MODEL, JUDGE_API_BASE, with defaults) from the environment `harbor run` runs in.
Nothing here imports Django; `harnesses.environment_export` feeds it an environment's tasks.
"""

from __future__ import annotations

import io
import json
import posixpath
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ANSWER_PATH = "/app/answer.md"
STATE_DIR = "/app/state"
ANSWER_LINE = f"Write your final answer to `{ANSWER_PATH}`."
DEFAULT_BASE_IMAGE = "python:3.13-slim"
DEFAULT_JUDGE_MODEL = "openai/gpt-4.1-mini"
DEFAULT_JUDGE_API_BASE = "https://openrouter.ai/api/v1"
# Harbor's task config format version (TaskConfig.schema_version in harbor 0.26).
TASK_SCHEMA_VERSION = "1.4"
JUDGE_SOURCE = (
    Path(__file__).resolve().parent.parent
    / "drivers"
    / "belvedir-runner"
    / "belvedir_runner"
    / "judge.py"
)
JUDGED_KINDS = ("judge", "rubric")
# task.toml's [metadata] key naming the Harbor agents the task's image holds (comma-separated);
# the Harbor driver reads it (drivers/harness-harbor/belvedir_harbor/dataset.py).
AGENTS_INSTALLED = "agents_installed"
_NO_ANSWER_NOTE = "belvedir: this task has no recorded answer; the oracle writes an empty one."


class ExportError(ValueError):
    """A task the export cannot write (the validator normally refuses it first)."""


@dataclass(frozen=True)
class ExportOptions:
    """What the export does not read from the tasks: the image, timeouts and the judge's
    defaults (JUDGE_MODEL / JUDGE_API_BASE set where Harbor runs win over them)."""

    base_image: str = DEFAULT_BASE_IMAGE
    # Harbor agents the base image already holds (`claude-code` in the image `make
    # claude-code-image` builds): every task.toml's [metadata] agents_installed says so, and
    # the Harbor driver runs such an agent on an offline install instead of refusing it.
    base_agents: tuple[str, ...] = ()
    judge_model: str = DEFAULT_JUDGE_MODEL
    judge_api_base: str = DEFAULT_JUDGE_API_BASE
    agent_timeout_sec: float = 600.0
    verifier_timeout_sec: float = 300.0
    build_timeout_sec: float = 600.0
    limit: int | None = None
    # Written into every task.toml's [metadata] (the environment's id, name, version).
    metadata: dict[str, str | int] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportFile:
    path: str  # relative, "/"-separated
    content: bytes
    executable: bool = False


def export_files(
    tasks: Iterable[dict], options: ExportOptions | None = None, *, judge_source: str | None = None
) -> list[ExportFile]:
    """The files of the export, in a stable order: a README, then each task's directory.

    `tasks` are task objects as docs/tasks-format.md describes them (validated); `limit` in the
    options keeps the first N. `judge_source` defaults to the Runner's judge.py.
    """
    options = options or ExportOptions()
    tasks = list(tasks)
    if options.limit is not None:
        if options.limit < 1:
            raise ExportError("limit must be at least 1.")
        tasks = tasks[: options.limit]
    if not tasks:
        raise ExportError("the environment has no tasks to export.")
    if any(_kind(t) in JUDGED_KINDS for t in tasks) and judge_source is None:
        try:
            judge_source = JUDGE_SOURCE.read_text(encoding="utf-8")
        except OSError:
            raise ExportError(f"the Runner's judge {JUDGE_SOURCE} is missing.") from None
    ids = [str(t.get("id") or f"task-{n}") for n, t in enumerate(tasks, start=1)]
    # The dataset's README, unless a task directory takes its name.
    files = [] if "readme.md" in {i.lower() for i in ids} else [_readme_file(tasks, options)]
    seen: set[str] = set()
    for number, (task_id, task) in enumerate(zip(ids, tasks, strict=True), start=1):
        if task_id in seen or not _safe_name(task_id):
            raise ExportError(f"task {number}: id {task_id!r} cannot name a task directory.")
        seen.add(task_id)
        files.extend(_task_files(task_id, task, options, judge_source or ""))
    return files


def write_directory(files: Iterable[ExportFile], out: Path) -> list[Path]:
    """Write the files under `out` (created; existing task directories are refused, so an
    export never mixes with an older one). Returns the task directories written."""
    files = list(files)
    out = Path(out)
    task_dirs = sorted({f.path.split("/", 1)[0] for f in files if "/" in f.path})
    clashes = [name for name in task_dirs if (out / name).exists()]
    if clashes:
        raise ExportError(
            f"{out / clashes[0]} already exists; export into an empty directory "
            "(or remove the old export first)."
        )
    for item in files:
        target = out / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.content)
        target.chmod(0o755 if item.executable else 0o644)
    return [out / name for name in task_dirs]


class _Chunks(io.RawIOBase):
    """A write-only, unseekable file that hands back what was written since the last look
    (zipfile then writes data descriptors, so a zip streams without seeking)."""

    def __init__(self):
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def zip_stream(files: Iterable[ExportFile], *, root: str = "") -> Iterator[bytes]:
    """The export as a zip, yielded file by file (modes kept, so test.sh and solve.sh stay
    executable), its entries under `root/` when a root is given."""
    sink = _Chunks()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for item in files:
            name = f"{root}/{item.path}" if root else item.path
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if item.executable else 0o100644) << 16
            archive.writestr(info, item.content)
            if chunk := sink.take():
                yield chunk
    if chunk := sink.take():
        yield chunk


def zip_bytes(files: Iterable[ExportFile], *, root: str = "") -> bytes:
    return b"".join(zip_stream(files, root=root))


# --- one task ---------------------------------------------------------------------------------


def _kind(task: dict) -> str:
    return str((task.get("verifier") or {}).get("kind") or "judge")


def _safe_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def _state_path(task_id: str, key: str, path: str) -> str:
    """A setup_state / golden path, checked again (no absolute path, no "..")."""
    normal = posixpath.normpath(path)
    if (
        not path
        or path.startswith("/")
        or normal.startswith("..")
        or ".." in path.split("/")
        or "" in path.split("/")
    ):
        raise ExportError(f"task {task_id}: verifier.{key} path {path!r} must be relative.")
    return normal


def _task_files(task_id: str, task: dict, options: ExportOptions, judge_source: str):
    kind = _kind(task)
    verifier = dict(task.get("verifier") or {"kind": "judge"})
    verifier["kind"] = kind
    record = {"id": task_id, "prompt": task["prompt"], "verifier": verifier}
    if task.get("answer") is not None:
        record["answer"] = task["answer"]
    setup_state = verifier.get("setup_state") or {}
    golden = verifier.get("golden") or {}
    if kind == "state_diff" and not golden:
        raise ExportError(f"task {task_id}: verifier.golden is required for state_diff.")

    def put(path: str, text: str, executable: bool = False) -> ExportFile:
        return ExportFile(f"{task_id}/{path}", text.encode("utf-8"), executable)

    files = [
        put("instruction.md", _instruction(task["prompt"], kind)),
        put("task.toml", _task_toml(task_id, task, kind, options)),
        put("environment/Dockerfile", _dockerfile(options.base_image, bool(setup_state))),
    ]
    for path, text in sorted(setup_state.items()):
        files.append(put(f"environment/state/{_state_path(task_id, 'setup_state', path)}", text))
    files.append(put("tests/test.sh", TEST_SH.format(kind=kind), executable=True))
    files.append(put("tests/grade.py", GRADE_PY))
    files.append(put("tests/task.json", json.dumps(record, indent=2, ensure_ascii=False) + "\n"))
    if kind in JUDGED_KINDS:
        files.append(put("tests/judge.py", judge_source))
    if kind == "code":
        files.append(put("tests/verify.py", str(verifier.get("source") or "")))
    golden_paths = {_state_path(task_id, "golden", p): text for p, text in golden.items()}
    solve = _solve_sh(task.get("answer"), golden_paths, judged=kind in JUDGED_KINDS)
    files.append(put("solution/solve.sh", solve, True))
    return files


def _instruction(prompt: str, kind: str) -> str:
    lines = [prompt.rstrip(), ""]
    if kind in ("state_diff", "code"):
        lines += [f"The task's files are under `{STATE_DIR}/`.", ""]
    lines.append(ANSWER_LINE)
    return "\n".join(lines) + "\n"


def _dockerfile(base_image: str, has_state: bool) -> str:
    lines = [
        f"FROM {base_image}",
        "USER root",
        f"RUN mkdir -p {STATE_DIR} /logs/verifier",
    ]
    if has_state:
        lines.append(f"COPY state/ {STATE_DIR}/")
    lines.append("WORKDIR /app")
    # Harbor keeps the container up with `sh -c "sleep infinity"`, which as PID 1 ignores
    # SIGTERM: `docker compose stop` would wait its 10 s on every trial before killing it.
    lines.append("STOPSIGNAL SIGKILL")
    return "\n".join(lines) + "\n"


def _toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, but for U+007F)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return _toml_string(str(value))


def _task_toml(task_id: str, task: dict, kind: str, options: ExportOptions) -> str:
    metadata: dict[str, object] = {**options.metadata, "task_id": task_id, "verifier_kind": kind}
    if options.base_agents:
        metadata[AGENTS_INSTALLED] = ",".join(options.base_agents)
    if task.get("metadata"):
        metadata["task_metadata"] = json.dumps(task["metadata"], ensure_ascii=False)
        if task["metadata"].get("group") is not None:
            # The Harbor driver writes it as the task's group in results.json.
            metadata["group"] = str(task["metadata"]["group"])
    out = [f"schema_version = {_toml_string(TASK_SCHEMA_VERSION)}", "", "[metadata]"]
    out += [f"{key} = {_toml_value(value)}" for key, value in metadata.items()]
    out += ["", "[verifier]", f"timeout_sec = {float(options.verifier_timeout_sec)!r}"]
    if kind in JUDGED_KINDS:
        # Harbor resolves ${VAR} and ${VAR:-default} from the host when the verifier runs.
        judge_env = {
            "JUDGE_API_KEY": "${JUDGE_API_KEY}",
            "JUDGE_MODEL": f"${{JUDGE_MODEL:-{options.judge_model}}}",
            "JUDGE_API_BASE": f"${{JUDGE_API_BASE:-{options.judge_api_base}}}",
        }
        out += ["", "[verifier.env]"]
        out += [f"{key} = {_toml_string(value)}" for key, value in judge_env.items()]
    out += ["", "[agent]", f"timeout_sec = {float(options.agent_timeout_sec)!r}"]
    out += ["", "[environment]", f"build_timeout_sec = {float(options.build_timeout_sec)!r}"]
    return "\n".join(out) + "\n"


def _heredoc(target: str, text: str) -> list[str]:
    """Shell lines writing `text` to `target` byte for byte (the heredoc's own last newline
    is cut again), under a delimiter no line of the text equals."""
    delimiter = "BELVEDIR_EOF"
    lines = text.split("\n")
    while delimiter in lines:
        delimiter += "_"
    quoted = "'" + target.replace("'", "'\\''") + "'"
    return [
        f'mkdir -p "$(dirname {quoted})"',
        f"cat > {quoted} <<'{delimiter}'",
        text,
        delimiter,
        f"truncate -s -1 {quoted}",
    ]


def _solve_sh(answer: str | None, golden: dict[str, str], *, judged: bool = False) -> str:
    lines = [
        "#!/bin/bash",
        "# The oracle: writes the recorded answer (and a state_diff task's golden files), so",
        "# `harbor run -a oracle` checks the verifier before any model is paid for.",
        "set -euo pipefail",
    ]
    if answer is None and judged:
        # Nothing to write: the judge grades an empty answer (usually 0), so an oracle run's
        # mean is 1.0 only when every judged task has a recorded answer.
        lines.append(f"echo {_NO_ANSWER_NOTE!r} >&2")
    lines += _heredoc(ANSWER_PATH, answer or "")
    for path, text in sorted(golden.items()):
        lines += _heredoc(f"{STATE_DIR}/{path}", text)
    return "\n".join(lines) + "\n"


def _readme_file(tasks: list[dict], options: ExportOptions) -> ExportFile:
    return ExportFile("README.md", _readme(tasks, options).encode())


def _readme(tasks: list[dict], options: ExportOptions) -> str:
    name = options.metadata.get("environment_name") or "Belvedir environment"
    kinds = sorted({_kind(t) for t in tasks})
    unanswered = [
        str(t.get("id") or f"task-{n}")
        for n, t in enumerate(tasks, start=1)
        if t.get("answer") is None and _kind(t) in JUDGED_KINDS
    ]
    note = ""
    if unanswered:
        shown = ", ".join(unanswered[:20]) + (" …" if len(unanswered) > 20 else "")
        note = (
            f"\n{len(unanswered)} judged task(s) have no recorded answer ({shown}): their "
            "solve.sh\nwrites an empty answer, which the judge scores low, so the oracle's mean "
            "is below 1.0.\n"
        )
    return f"""# {name}

A Harbor dataset exported from Belvedir: {len(tasks)} task(s), verifier kinds {", ".join(kinds)}.
Each directory is one Harbor task (instruction.md, task.toml, environment/, tests/, solution/).

    export JUDGE_API_KEY=...                      # judge and rubric tasks: the judge's key
    export JUDGE_MODEL={options.judge_model}      # optional; so is JUDGE_API_BASE
    harbor run -p . -a oracle -y                  # the verifiers, on the recorded answers: 1.0
    harbor run -p . -a claude-code -m anthropic/claude-sonnet-4 -y

The agent writes its final answer to {ANSWER_PATH}; state_diff and code tasks also read the
files under {STATE_DIR}/. The task images build FROM {options.base_image}.
{note}"""


TEST_SH = """#!/bin/bash
# Belvedir verifier ({kind}): grades /app/answer.md, writes the reward to /logs/verifier/reward.txt.
set -uo pipefail
mkdir -p /logs/verifier
exec python3 "$(dirname "$0")/grade.py"
"""

GRADE_PY = '''"""Grade this task's answer and write the reward (0..1) to /logs/verifier/reward.txt.

Standard library only. tests/task.json says how: judge and rubric ask the judge (tests/judge.py,
the Belvedir Runner's own, with JUDGE_MODEL / JUDGE_API_BASE / JUDGE_API_KEY); code runs the
task's verify(answer, state) from tests/verify.py; state_diff compares the files under
/app/state with the golden files. When the judge cannot be reached no reward is written, so
Harbor reports a verifier error rather than a score of 0.
"""

import json
import sys
import traceback
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ANSWER = Path("/app/answer.md")
STATE = Path("/app/state")
REWARD = Path("/logs/verifier/reward.txt")


def read_answer():
    try:
        return ANSWER.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def read_state():
    if not STATE.is_dir():
        return {}
    return {
        path.relative_to(STATE).as_posix(): path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(STATE.rglob("*"))
        if path.is_file()
    }


def grade_judge(task, answer):
    sys.path.insert(0, str(TESTS))
    import judge

    endpoint = judge.endpoint_from_env()
    if not endpoint.model:
        raise SystemExit("grade: JUDGE_MODEL is not set.")
    try:
        verdict = judge.grade(endpoint, task, answer)
    except (judge.Unreachable, judge.CallFailed) as exc:
        raise SystemExit(f"grade: {exc}") from None
    return verdict["score"], verdict["reason"]


def grade_code(answer):
    source = (TESTS / "verify.py").read_text(encoding="utf-8")
    namespace = {"__name__": "verify"}
    try:
        exec(compile(source, str(TESTS / "verify.py"), "exec"), namespace)
        result = namespace["verify"](answer, read_state())
    except Exception:
        return 0.0, "verify raised:\\n" + traceback.format_exc(limit=4)
    if isinstance(result, bool):
        return float(result), f"verify returned {result}"
    if isinstance(result, (int, float)) and 0 <= result <= 1:
        return float(result), f"verify returned {result}"
    return 0.0, f"verify returned {result!r}, not True/False or a number in [0, 1]"


def grade_state_diff(task):
    state = read_state()
    wrong = []
    for path, text in sorted(task["verifier"]["golden"].items()):
        if path not in state:
            wrong.append(f"{path}: missing")
        elif state[path].rstrip() != text.rstrip():
            wrong.append(f"{path}: differs from the golden file")
    if wrong:
        return 0.0, "; ".join(wrong)
    return 1.0, "every golden file matches"


def main():
    task = json.loads((TESTS / "task.json").read_text(encoding="utf-8"))
    kind = task["verifier"]["kind"]
    answer = read_answer()
    if kind in ("judge", "rubric"):
        score, reason = grade_judge(task, answer)
    elif kind == "code":
        score, reason = grade_code(answer)
    elif kind == "state_diff":
        score, reason = grade_state_diff(task)
    else:
        raise SystemExit(f"grade: unknown verifier kind {kind!r}")
    REWARD.parent.mkdir(parents=True, exist_ok=True)
    REWARD.write_text(f"{score}\\n")
    print(json.dumps({"task": task["id"], "kind": kind, "score": score, "reason": reason}))


if __name__ == "__main__":
    main()
'''
