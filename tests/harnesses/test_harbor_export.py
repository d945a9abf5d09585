"""The Harbor export as a pure function: the files each task directory holds, byte for byte
where it matters (the oracle's answer, the grader's verdicts), and the key that is never in it."""

import io
import json
import subprocess
import sys
import tomllib
import zipfile

import pytest

from harnesses import harbor_export
from harnesses.harbor_export import (
    ANSWER_LINE,
    ExportError,
    ExportOptions,
    export_files,
    write_directory,
    zip_bytes,
)
from tests.helpers.harbor import FOUR_KINDS
from tests.traces.fake_openai import FakeOpenAI

JUDGE = "# the runner's judge\n"

TASKS = FOUR_KINDS


def files_of(tasks=TASKS, **options) -> dict[str, harbor_export.ExportFile]:
    files = export_files(tasks, ExportOptions(**options), judge_source=JUDGE)
    return {f.path: f for f in files}


def text(files, path) -> str:
    return files[path].content.decode()


def test_each_task_gets_a_harbor_task_directory():
    files = files_of()
    for task_id in ("capital", "refund", "sum", "todo"):
        for name in ("instruction.md", "task.toml", "environment/Dockerfile"):
            assert f"{task_id}/{name}" in files
        assert files[f"{task_id}/tests/test.sh"].executable
        assert files[f"{task_id}/solution/solve.sh"].executable
    assert "README.md" in files
    assert text(files, "sum/tests/verify.py") == TASKS[2]["verifier"]["source"]
    assert (
        text(files, "todo/environment/state/notes/todo.txt") == "[ ] buy milk\n[ ] walk the dog\n"
    )
    assert text(files, "capital/tests/judge.py") == JUDGE
    assert "sum/tests/judge.py" not in files  # code and state_diff need no judge


def test_the_instruction_is_the_prompt_ending_with_the_answer_line():
    files = files_of()
    instruction = text(files, "capital/instruction.md")
    assert instruction.startswith("What is the capital of France?\n")
    assert instruction.rstrip("\n").splitlines()[-1] == ANSWER_LINE
    assert "/app/answer.md" in ANSWER_LINE
    assert "/app/state/" in text(files, "todo/instruction.md")


def test_task_toml_templates_the_judge_from_the_environment_and_holds_no_key():
    files = files_of(
        judge_model="acme/judge", agent_timeout_sec=120, metadata={"environment": "env_1"}
    )
    config = tomllib.loads(text(files, "refund/task.toml"))
    assert config["schema_version"] == "1.4"
    assert config["verifier"]["env"] == {
        "JUDGE_API_KEY": "${JUDGE_API_KEY}",
        "JUDGE_MODEL": "${JUDGE_MODEL:-acme/judge}",
        "JUDGE_API_BASE": "${JUDGE_API_BASE:-https://openrouter.ai/api/v1}",
    }
    assert config["agent"]["timeout_sec"] == 120.0
    assert config["metadata"]["environment"] == "env_1"
    assert config["metadata"]["verifier_kind"] == "rubric"
    assert json.loads(config["metadata"]["task_metadata"]) == {"topic": "billing", "level": None}
    # Deterministic verifiers read no host variable, so Harbor asks for no host access.
    assert "env" not in tomllib.loads(text(files, "sum/task.toml"))["verifier"]


def test_the_dockerfile_builds_from_the_configured_base_image_and_places_setup_state():
    files = files_of(base_image="belvedir-sandbox:latest")
    dockerfile = text(files, "todo/environment/Dockerfile")
    assert dockerfile.splitlines()[0] == "FROM belvedir-sandbox:latest"
    assert "COPY state/ /app/state/" in dockerfile
    assert "COPY" not in text(files, "capital/environment/Dockerfile")
    # Harbor's keep-alive shell ignores SIGTERM: a trial's container stops at once.
    assert dockerfile.splitlines()[-1] == "STOPSIGNAL SIGKILL"


def test_limit_keeps_the_first_tasks():
    files = files_of(limit=2)
    assert {p.split("/")[0] for p in files if "/" in p} == {"capital", "refund"}
    with pytest.raises(ExportError, match="limit"):
        files_of(limit=0)


def test_tasks_without_an_id_are_numbered_and_bad_paths_are_refused():
    files = files_of([{"prompt": "a"}, {"prompt": "b"}])
    assert "task-1/task.toml" in files and "task-2/task.toml" in files
    bad = {"kind": "state_diff", "golden": {"../escape": "x"}}
    with pytest.raises(ExportError, match="relative"):
        files_of([{"id": "t", "prompt": "p", "verifier": bad}])
    named_readme = files_of([{"id": "README.md", "prompt": "a"}])
    assert "README.md/task.toml" in named_readme and "README.md" not in named_readme
    with pytest.raises(ExportError, match="no tasks"):
        files_of([])


def run_solve(files, task_id, tmp_path, monkeypatch) -> None:
    """solve.sh as the oracle runs it, with /app moved under tmp_path."""
    script = text(files, f"{task_id}/solution/solve.sh").replace("/app/", f"{tmp_path}/app/")
    subprocess.run(["bash", "-c", script], check=True)


@pytest.mark.parametrize(
    "answer",
    [
        "4",
        "",
        "two\nlines\n",
        "ends without newline",
        "BELVEDIR_EOF\nBELVEDIR_EOF_",
        "it's $HOME `x`",
    ],
)
def test_solve_writes_the_recorded_answer_byte_for_byte(answer, tmp_path, monkeypatch):
    files = files_of([{"id": "t", "prompt": "p", "answer": answer}])
    run_solve(files, "t", tmp_path, monkeypatch)
    assert (tmp_path / "app/answer.md").read_text() == answer


def test_a_judge_task_without_a_recorded_answer_says_the_oracle_has_none(tmp_path):
    files = files_of([{"id": "open", "prompt": "Write a haiku."}, {"id": "t", "prompt": "p"}])
    script = text(files, "open/solution/solve.sh").replace("/app/", f"{tmp_path}/app/")
    done = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True)
    assert (tmp_path / "app/answer.md").read_text() == ""
    assert "no recorded answer" in done.stderr
    assert "2 judged task(s) have no recorded answer (open, t)" in text(files, "README.md")
    answered = files_of([{"id": "t", "prompt": "p", "answer": "a"}])
    assert "no recorded answer" not in text(answered, "t/solution/solve.sh")
    assert "no recorded answer" not in text(answered, "README.md")


def test_solve_writes_the_golden_state(tmp_path, monkeypatch):
    files = files_of()
    run_solve(files, "todo", tmp_path, monkeypatch)
    assert (tmp_path / "app/state/notes/todo.txt").read_text() == "[x] buy milk\n[ ] walk the dog\n"
    assert (tmp_path / "app/answer.md").read_text() == "Ticked."


def grade(files, task_id, tmp_path, answer=None, state=None) -> tuple[float | None, str]:
    """Run the task's tests/grade.py with /app and /logs moved under tmp_path."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for path, item in files.items():
        if path.startswith(f"{task_id}/tests/"):
            (tests / path.rsplit("/", 1)[1]).write_bytes(item.content)
    source = (tests / "grade.py").read_text()
    for old in ("/app/", "/logs/"):
        source = source.replace(f'Path("{old}', f'Path("{tmp_path}{old}')
    (tests / "grade.py").write_text(source)
    if answer is not None:
        (tmp_path / "app").mkdir(exist_ok=True)
        (tmp_path / "app/answer.md").write_text(answer)
    for path, content in (state or {}).items():
        target = tmp_path / "app/state" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    done = subprocess.run([sys.executable, str(tests / "grade.py")], capture_output=True, text=True)
    reward = tmp_path / "logs/verifier/reward.txt"
    return (float(reward.read_text()) if reward.exists() else None), done.stdout + done.stderr


def test_code_verify_scores_the_answer(tmp_path):
    assert grade(files_of(), "sum", tmp_path, answer="4\n")[0] == 1.0


def test_code_verify_failing_raising_or_out_of_range_scores_zero(tmp_path):
    sources = {
        "wrong": "def verify(answer, state):\n    return answer == 'x'\n",
        "raises": "def verify(answer, state):\n    raise KeyError('boom')\n",
        "range": "def verify(answer, state):\n    return 7\n",
        "half": "def verify(answer, state):\n    return 0.5 if state == {'a.txt': 'A'} else 0\n",
    }
    scores = {}
    for name, source in sources.items():
        task = {"id": name, "prompt": "p", "verifier": {"kind": "code", "source": source}}
        root = tmp_path / name
        root.mkdir()
        scores[name], output = grade(files_of([task]), name, root, answer="4", state={"a.txt": "A"})
        if name == "raises":
            assert "KeyError" in output
    assert scores == {"wrong": 0.0, "raises": 0.0, "range": 0.0, "half": 0.5}


def test_state_diff_needs_every_golden_file(tmp_path):
    files = files_of()
    right = tmp_path / "right"
    wrong = tmp_path / "wrong"
    right.mkdir(), wrong.mkdir()
    # Trailing whitespace at the end of a file is ignored; anything else is a difference.
    ok = grade(
        files, "todo", right, state={"notes/todo.txt": "[x] buy milk\n[ ] walk the dog\n\n  "}
    )
    bad = grade(files, "todo", wrong, state={"notes/todo.txt": "[ ] buy milk\n[ ] walk the dog\n"})
    assert ok[0] == 1.0
    assert bad[0] == 0.0 and "notes/todo.txt: differs" in bad[1]


def test_judge_tasks_are_graded_by_the_runners_judge_with_the_key_from_the_environment(
    tmp_path, monkeypatch
):
    files = {f.path: f for f in export_files(TASKS[:2])}
    assert files["refund/tests/judge.py"].content == harbor_export.JUDGE_SOURCE.read_bytes()
    with FakeOpenAI(reply='{"score": 0.5, "reason": "one criterion of two"}') as judge:
        monkeypatch.setenv("JUDGE_MODEL", "acme/judge")
        monkeypatch.setenv("JUDGE_API_BASE", judge.base_url)
        monkeypatch.setenv("JUDGE_API_KEY", "sk-judge")
        reward, output = grade(files, "refund", tmp_path, answer="Store credit only.")
    assert reward == 0.5
    assert "one criterion of two" in output
    (sent,) = judge.requests
    assert sent["headers"]["Authorization"] == "Bearer sk-judge"
    assert sent["body"]["model"] == "acme/judge"
    prompt = sent["body"]["messages"][-1]["content"]
    assert "Offers credit" in prompt and "Store credit only." in prompt


def test_a_judge_that_refuses_the_call_writes_no_reward(tmp_path, monkeypatch):
    files = {f.path: f for f in export_files(TASKS[:1])}
    with FakeOpenAI() as judge:
        monkeypatch.setenv("JUDGE_MODEL", "acme/judge")
        monkeypatch.setenv("JUDGE_API_BASE", f"{judge.url}/no-such-api")  # answers 404
        reward, output = grade(files, "capital", tmp_path, answer="Paris")
    assert reward is None  # Harbor then reports a verifier error, not a score of 0
    assert "the judge" in output and "404" in output


def test_directory_and_zip_keep_the_scripts_executable(tmp_path):
    files = export_files(TASKS, judge_source=JUDGE)
    written = write_directory(files, tmp_path / "env")
    assert [p.name for p in written] == ["capital", "refund", "sum", "todo"]
    assert (tmp_path / "env/sum/tests/test.sh").stat().st_mode & 0o111
    with pytest.raises(ExportError, match="already exists"):
        write_directory(files, tmp_path / "env")
    archive = zipfile.ZipFile(io.BytesIO(zip_bytes(files, root="env")))
    info = archive.getinfo("env/todo/solution/solve.sh")
    assert (info.external_attr >> 16) & 0o111
    assert archive.read("env/capital/instruction.md") == files[1].content
