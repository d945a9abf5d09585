"""The Runner's folding, retries and notes, run on the host against a scripted model and judge
(the sandboxed run through the platform is test_runner_e2e.py)."""

import json
import os
import subprocess
import sys

import pytest

from tests.drivers.helpers import EXPECTED, RUNNER, SCRIPTS, TASKS_TEXT, ScriptedLLM

from belvedir_runner import grading, judge, runner  # isort: skip
from belvedir_runner.judge import CallFailed, Endpoint, Unreachable  # isort: skip


@pytest.mark.parametrize(
    "rule,expected", [("pass@1", 1 / 3), ("pass@k", 1.0), ("mean", (1 + 0.2 + 0.4) / 3)]
)
def test_attempts_fold_by_the_grading_rule(rule, expected):
    assert grading.task_score([1.0, 0.2, 0.4], rule, 0.5) == pytest.approx(expected)


def test_a_task_with_no_attempts_scores_zero_and_an_unknown_rule_is_refused():
    assert grading.task_score([], "mean", 0.5) == 0.0
    assert grading.grading_from("") == "pass@1"
    with pytest.raises(ValueError, match="BELVEDIR_GRADING is 'best'"):
        grading.grading_from("best")


@pytest.mark.parametrize(
    "reply,score",
    [
        ('{"score": 0.75, "reason": "mostly"}', 0.75),
        ('Sure. {"score": 1, "reason": "right"} Done.', 1.0),
        ('{"score": 7, "reason": "x"}', 1.0),
        ("PASS: it is right", 1.0),
        ("I cannot tell", 0.0),
    ],
)
def test_the_judges_reply_is_read_leniently(reply, score):
    assert judge.read_verdict(reply)[0] == score


def test_an_unreadable_verdict_says_so():
    assert "could not be read" in judge.read_verdict("hmm")[1]


def _endpoint(llm, **kw) -> Endpoint:
    waits = []
    endpoint = Endpoint(model="m", api_base=llm.base_url, backoff=0.5, sleep=waits.append, **kw)
    return endpoint, waits


def test_429_and_5xx_are_retried_with_backoff_then_succeed():
    with ScriptedLLM({"q": ["good"]}) as llm:
        llm.fail_first = [429, 503, 502]
        endpoint, waits = _endpoint(llm)
        reply, tokens = judge.chat(endpoint, [{"role": "user", "content": "q"}])
    assert reply == "good" and tokens == {"input": 10, "output": 2}
    assert len(llm.requests) == 4
    # Retry-After: 0 from the 429, then base * 2^n (1 s, 2 s for a 0.5 s base, + jitter).
    assert waits[0] == 0.0 and 1.0 <= waits[1] <= 1.25 and 2.0 <= waits[2] <= 2.5


def test_retries_run_out_on_a_persistent_503():
    with ScriptedLLM() as llm:
        llm.fail_first = [503] * 3
        endpoint, waits = _endpoint(llm, retries=2)
        with pytest.raises(CallFailed, match="HTTP 503: try later"):
            judge.chat(endpoint, [{"role": "user", "content": "q"}])
    assert len(waits) == 2


def test_a_401_is_not_retried_and_stops_the_run():
    with ScriptedLLM() as llm:
        llm.fail_first = [401]
        endpoint, waits = _endpoint(llm)
        with pytest.raises(Unreachable, match="refused the call: HTTP 401"):
            judge.chat(endpoint, [{"role": "user", "content": "q"}])
    assert waits == []


def test_a_closed_port_is_unreachable_after_the_retries():
    endpoint = Endpoint(model="m", api_base="http://127.0.0.1:9/v1", retries=1, sleep=lambda s: 0)
    with pytest.raises(Unreachable, match="the model at http://127.0.0.1:9/v1/chat/completions"):
        judge.chat(endpoint, [{"role": "user", "content": "q"}])


def run_runner(tmp_path, env: dict, tasks: str = TASKS_TEXT) -> subprocess.CompletedProcess:
    (tmp_path / "tasks.txt").write_text(tasks)
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(RUNNER)}
    env = {
        "BELVEDIR_TASKS_FILE": str(tmp_path / "tasks.txt"),
        "RUNNER_BACKOFF_SECONDS": "0",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "belvedir_runner"],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("rule", ["pass@1", "pass@k", "mean"])
def test_the_runner_folds_three_attempts_into_the_expected_score(tmp_path, rule):
    with ScriptedLLM(SCRIPTS) as llm:
        done = run_runner(
            tmp_path,
            {
                "MODEL": "model-under-test",
                "MODEL_API_BASE": llm.base_url,
                "MODEL_API_KEY": "sk-model",
                "JUDGE_MODEL": "judge",
                "JUDGE_API_BASE": llm.base_url,
                "JUDGE_API_KEY": "sk-judge",
                "BELVEDIR_TASK_ATTEMPTS": "3",
                "BELVEDIR_GRADING": rule,
                "RUNNER_CONCURRENCY": "2",
            },
        )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["score"] == pytest.approx(EXPECTED[rule])
    assert results["grading"] == rule and results["attempts"] == 3
    capital = results["tasks"][0]
    assert [a["answer"] for a in capital["attempts"]] == ["good", "bad", "bad"]
    assert [a["score"] for a in capital["attempts"]] == [1.0, 0.2, 0.2]
    assert capital["attempts"][0]["reason"] == "the answer is good"
    assert capital["attempts"][0]["tokens"] == {"input": 10, "output": 2}
    assert results["tokens"] == {"input": 90, "output": 18, "judge_input": 90, "judge_output": 18}
    assert results["tasks"][1]["metadata"] == {"topic": "billing"}
    # Each side used its own key; the rubric's criteria were in the judge's prompt.
    keys = {r["body"]["model"]: r["headers"]["Authorization"] for r in llm.requests}
    assert keys == {"model-under-test": "Bearer sk-model", "judge": "Bearer sk-judge"}
    judged = [
        r["body"]["messages"][-1]["content"] for r in llm.requests if r["body"]["model"] == "judge"
    ]
    assert sum("1. Cites 30 days\n2. Offers credit" in p for p in judged) == 3
    assert sum("## Reference answer\nParis" in p for p in judged) == 3


def test_code_and_state_diff_tasks_are_refused_up_front_naming_them(tmp_path):
    tasks = json.dumps(
        [
            {"id": "ok", "prompt": "Hi"},
            {
                "id": "sum",
                "prompt": "p",
                "verifier": {"kind": "code", "source": "def verify(a, s): return 1"},
            },
            {"id": "todo", "prompt": "p", "verifier": {"kind": "state_diff", "golden": {"a": "b"}}},
        ]
    )
    with ScriptedLLM() as llm:
        done = run_runner(
            tmp_path, {"MODEL": "m", "MODEL_API_BASE": llm.base_url, "JUDGE_MODEL": "judge"}, tasks
        )
    assert done.returncode == 2
    assert "sum (code), todo (state_diff) run under Harbor only" in done.stderr
    assert llm.requests == [] and not (tmp_path / "results.json").exists()


def test_an_unreachable_model_stops_the_run_with_a_clear_note(tmp_path):
    done = run_runner(
        tmp_path,
        {
            "MODEL": "m",
            "MODEL_API_BASE": "http://127.0.0.1:9/v1",
            "JUDGE_MODEL": "judge",
            "RUNNER_RETRIES": "1",
        },
    )
    assert done.returncode == 3
    assert (
        "belvedir-runner: stopped: the model at http://127.0.0.1:9/v1/chat/completions is unreachable"
        in done.stderr
    )
    assert not (tmp_path / "results.json").exists()


def test_an_unreachable_judge_stops_the_run_naming_the_judge(tmp_path):
    with ScriptedLLM() as llm:
        done = run_runner(
            tmp_path,
            {
                "MODEL": "m",
                "MODEL_API_BASE": llm.base_url,
                "JUDGE_MODEL": "judge",
                "JUDGE_API_BASE": "http://127.0.0.1:9/v1",
                "RUNNER_RETRIES": "0",
            },
        )
    assert done.returncode == 3 and "the judge at http://127.0.0.1:9/v1" in done.stderr


def _judged_by(tmp_path, judge_llm, llm, **env) -> subprocess.CompletedProcess:
    return run_runner(
        tmp_path,
        {
            "MODEL": "model-under-test",
            "MODEL_API_BASE": llm.base_url,
            "JUDGE_MODEL": "judge",
            "JUDGE_API_BASE": judge_llm.base_url,
            "JUDGE_API_KEY": "sk-judge",
            "RUNNER_RETRIES": "0",
            "RUNNER_CONCURRENCY": "1",
            **env,
        },
    )


def test_a_task_the_judge_could_not_grade_is_errored_not_zero(tmp_path):
    with ScriptedLLM(SCRIPTS) as llm, ScriptedLLM() as judge_llm:
        judge_llm.fail_first = [503]  # the first task's answer is never judged
        done = _judged_by(tmp_path, judge_llm, llm)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    capital, *others = results["tasks"]
    assert capital["score"] is None
    assert capital["errored"] == "the judge failed: HTTP 503: try later"
    assert capital["attempts"][0]["errored"] == capital["errored"]
    assert results["errored"] == {capital["id"]: capital["errored"]}
    assert results["score"] == pytest.approx(sum(t["score"] for t in others) / len(others))
    assert f"1 of {len(results['tasks'])} tasks errored" in done.stderr


def test_a_run_whose_judge_graded_nothing_has_no_score_and_exits_3(tmp_path):
    with ScriptedLLM(SCRIPTS) as llm, ScriptedLLM() as judge_llm:
        judge_llm.fail_first = [503] * 100
        done = _judged_by(tmp_path, judge_llm, llm)
    assert done.returncode == 3, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["score"] is None and results["passed"] == results["failed"] == 0
    assert set(results["errored"]) == {t["id"] for t in results["tasks"]}
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("belvedir-runner: every task errored (3 of 3): the judge could not")


def test_missing_settings_are_named(tmp_path):
    done = run_runner(tmp_path, {"JUDGE_MODEL": "judge"})
    assert done.returncode == 2 and "MODEL is not set" in done.stderr
    done = run_runner(tmp_path, {"MODEL": "m", "BELVEDIR_GRADING": "best"})
    assert "BELVEDIR_GRADING is 'best'" in done.stderr
    done = run_runner(tmp_path, {"MODEL": "m"})
    assert "JUDGE_MODEL is not set" in done.stderr


def test_without_the_sdk_the_run_goes_on_untraced_with_a_note(tmp_path):
    with ScriptedLLM(SCRIPTS) as llm:
        done = run_runner(
            tmp_path,
            {
                "MODEL": "m",
                "MODEL_API_BASE": llm.base_url,
                "JUDGE_MODEL": "judge",
                "BELVEDIR_API_KEY": "bv_live_x",
                "BELVEDIR_BASE_URL": "http://127.0.0.1:9",
                "BELVEDIR_RUN_ID": "run_x",
                # No SDK here: `import belvedir` finds the platform's package of the same name.
                "PYTHONPATH": f"{RUNNER}:{tmp_path / 'no-sdk'}",
            },
        )
    assert done.returncode == 0, done.stderr
    assert "belvedir-runner: tracing off: the belvedir SDK is not available" in done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["tracing"].startswith("off: the belvedir SDK is not available")


def test_results_shrink_to_fit_the_platforms_limit():
    long = {"attempt": 1, "answer": "x" * 5000, "reason": "y" * 2000, "score": 1.0}
    document = {
        "score": 1.0,
        "tasks": [{"id": f"t{n}", "attempts": [dict(long)]} for n in range(60)],
    }
    fitted = runner.fit(document, limit=100_000)
    assert len(json.dumps(fitted)) <= 100_000
    assert fitted["tasks"][0]["attempts"][0]["answer"] in ("x" * 500, "x" * 100, "")
    assert fitted["score"] == 1.0 and len(fitted["tasks"]) == 60
