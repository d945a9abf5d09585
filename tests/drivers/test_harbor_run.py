"""The Harbor driver's run command on the host (no Harbor needed): its settings become the
right `harbor run` (dataset kinds, agent names, where the task containers run, telemetry off),
bad settings are refused naming the variable, a `belvedir:<id>` dataset is fetched with the
run's key, an offline registry dataset fails fast, and Harbor's job result becomes
results.json."""

import json
from pathlib import Path

import pytest

from tests.drivers.helpers import HARBOR, ExportServer, free_port

from belvedir_harbor import agents, run  # isort: skip
from belvedir_runner import runner, tracing  # isort: skip
from runs.results import task_results  # isort: skip

MANAGED = {"BELVEDIR_BASE_URL": "http://172.30.0.1:18700", "BELVEDIR_API_KEY": "bv_run_x"}


def test_a_platform_run_uses_the_belvedir_environment_and_plain_agent_names(tmp_path):
    env = {**MANAGED, "HARBOR_DATASET": "belvedir-sample", "HARBOR_AGENT": "oracle"}
    env |= {"HARBOR_CONCURRENCY": "2", "HARBOR_TASK_NAMES": "sum, hello", "MODEL": "m"}
    dataset = run.prepare_dataset(env, tmp_path)
    assert dataset == HARBOR / "belvedir_harbor" / "sample"
    command = run.harbor_command(env, dataset, tmp_path / "jobs")
    assert command == [
        *("harbor", "run", "-y", "--jobs-dir", str(tmp_path / "jobs"), "-p", str(dataset)),
        *("-a", "oracle", "-n", "2"),  # oracle calls no model: no -m
        *("--env", "belvedir_harbor.environment:BelvedirEnvironment"),
        *("--include-task-name", "sum", "--include-task-name", "hello"),
    ]
    env["HARBOR_AGENT"] = "belvedir"
    assert run.harbor_command(env, dataset, tmp_path)[8] == "belvedir_harbor.agent:BelvedirAgent"
    # Terminus (LiteLLM in Harbor's process) asks MODEL through MODEL_API_BASE too.
    terminus = {**env, "HARBOR_AGENT": "terminus-2", "MODEL_API_BASE": "http://gw/api/v1"}
    command = run.harbor_command(terminus, dataset, tmp_path)
    assert command[7:13] == [
        "-a",
        "terminus-2",
        "--ak",
        "api_base=http://gw/api/v1",
        "-m",
        "openai/m",
    ]
    # No asciinema recording in the managed workspace (it never starts under its gVisor).
    assert "record_terminal_session=false" in command
    assert "record_terminal_session=false" not in run.harbor_command(
        {**terminus, "MODAL_TOKEN_ID": "a", "MODAL_TOKEN_SECRET": "b"}, dataset, tmp_path
    )
    # Both Modal tokens: the user's Modal account; one alone changes nothing.
    one = run.harbor_command({**env, "MODAL_TOKEN_ID": "a"}, dataset, tmp_path)
    assert one[one.index("--env") + 1] == run.ENVIRONMENT_IMPORT_PATH
    modal = run.harbor_command(
        {**env, "MODAL_TOKEN_ID": "a", "MODAL_TOKEN_SECRET": "b"}, dataset, tmp_path
    )
    assert modal[modal.index("--env") + 1] == "modal"


def test_harbor_runs_with_telemetry_off_and_the_model_base_for_litellm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"HARBOR_TELEMETRY": "1", "MODEL_API_BASE": "http://router/v1", "MODEL_API_KEY": "k"}
    # A HOME nobody can write, root included (os.access is True for root on any directory).
    home = tmp_path / "no-such-home"
    out = run.harbor_env({**env, "HOME": str(home), "PYTHONPATH": "/x"})
    assert out["HARBOR_TELEMETRY"] == "0"
    assert out["OPENAI_BASE_URL"] == out["OPENAI_API_BASE"] == "http://router/v1"
    assert out["OPENAI_API_KEY"] == "k"
    assert out["PYTHONPATH"].split(":") == [str(HARBOR), "/x"]
    assert out["HOME"] == str(tmp_path / ".harbor-home")  # Harbor writes its cache there
    assert run.harbor_env({"HOME": str(tmp_path)})["HOME"] == str(tmp_path)  # a writable one stays


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("HARBOR_CONCURRENCY", "0", "HARBOR_CONCURRENCY must be a whole number, at least 1"),
        ("HARBOR_CONCURRENCY", "two", "HARBOR_CONCURRENCY must be a whole number"),
        ("HARBOR_N_TASKS", "-1", "HARBOR_N_TASKS must be a whole number"),
        ("BELVEDIR_TASK_ATTEMPTS", "0", "BELVEDIR_TASK_ATTEMPTS must be a whole number, 1 to"),
        ("BELVEDIR_GRADING", "best", "BELVEDIR_GRADING is 'best'; it must be pass@1, pass@k"),
    ],
)
def test_bad_numbers_are_refused_naming_the_variable(name, value, message, tmp_path):
    with pytest.raises(run.Refused, match=message):
        run.harbor_command({"HARBOR_DATASET": "belvedir-sample", name: value}, None, tmp_path)


def test_no_dataset_is_refused_and_main_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARBOR_DATASET", raising=False)
    assert run.main([]) == 2
    assert "HARBOR_DATASET is not set" in capsys.readouterr().err
    # A Tasks file with no dataset is the platform's export of the run's Tasks field.
    with pytest.raises(run.Refused, match="Tasks field is fetched from the platform"):
        run.prepare_dataset({"BELVEDIR_TASKS_FILE": "tasks.json"}, tmp_path)


def test_an_offline_registry_dataset_fails_fast_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "REGISTRY_URL", f"http://127.0.0.1:{free_port()}/registry.json")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARBOR_DATASET", "terminal-bench@2.1")
    assert run.main([]) == 2
    err = capsys.readouterr().err
    assert "'terminal-bench@2.1' is a Harbor registry dataset" in err
    assert "registry datasets need an online install" in err


def test_an_environment_dataset_is_fetched_with_the_run_key(tmp_path):
    files = {"README.md": "x", "sum/task.toml": "", "sum/tests/test.sh": "#!/bin/bash\n"}
    with ExportServer(files) as platform:
        env = {"BELVEDIR_BASE_URL": platform.url, "BELVEDIR_API_KEY": "bv_run_k"}
        env |= {"HARBOR_DATASET": "belvedir:env_1", "HARBOR_N_TASKS": "3"}
        dataset = run.prepare_dataset(env, tmp_path)
        assert dataset == tmp_path / "harbor-dataset" / "Env-v1"
        assert (dataset / "sum" / "tests" / "test.sh").stat().st_mode & 0o111
        # The environment has 7 tasks, whatever the limit let in.
        assert run.dataset_size(dataset) == 7
        # Picked task names: the whole export (the names may lie past the first N).
        run.prepare_dataset({**env, "HARBOR_TASK_NAMES": "sum"}, tmp_path)
        with pytest.raises(run.Refused, match="could not export environment env_2 .HTTP 404"):
            run.prepare_dataset({**env, "HARBOR_DATASET": "belvedir:env_2"}, tmp_path)
    assert platform.requests[:2] == [
        ("/api/v1/environments/env_1/export?limit=3", "Bearer bv_run_k"),
        ("/api/v1/environments/env_1/export", "Bearer bv_run_k"),
    ]
    with pytest.raises(run.Refused, match="BELVEDIR_BASE_URL and BELVEDIR_API_KEY"):
        run.prepare_dataset({"HARBOR_DATASET": "belvedir:env_1"}, tmp_path)


def test_a_tasks_field_is_the_platforms_export_of_the_runs_tasks(tmp_path):
    files = {"README.md": "x", "refund/task.toml": "", "refund/tests/test.sh": "#!/bin/bash\n"}
    with ExportServer(files) as platform:
        env = {"BELVEDIR_BASE_URL": platform.url, "BELVEDIR_API_KEY": "bv_run_k"}
        env |= {"BELVEDIR_RUN_ID": "run_1", "BELVEDIR_TASKS_FILE": "/control/tasks.json"}
        dataset = run.prepare_dataset({**env, "HARBOR_N_TASKS": "2"}, tmp_path)
        assert dataset == tmp_path / "harbor-dataset" / "Env-v1"
        assert (dataset / "refund" / "tests" / "test.sh").stat().st_mode & 0o111
        assert run.dataset_size(dataset) == 7
        with pytest.raises(run.Refused, match="could not export the Tasks field .HTTP 404"):
            run.prepare_dataset({**env, "BELVEDIR_RUN_ID": "run_2"}, tmp_path)
        # --check (the install step) fetches nothing.
        assert run.prepare_dataset(env, tmp_path / "c", check=True) == (
            tmp_path / "c" / "harbor-dataset"
        )
    assert platform.requests == [
        ("/api/v1/runs/run_1/tasks/export?limit=2", "Bearer bv_run_k"),
        ("/api/v1/runs/run_2/tasks/export", "Bearer bv_run_k"),
    ]
    command = run.harbor_command(env, dataset, tmp_path / "jobs")
    assert command[command.index("-p") + 1] == str(dataset)
    write_job(tmp_path / "jobs", trial("refund", 1.0))
    assert run.read_job(tmp_path / "jobs", env)["dataset"] == "tasks"


def trial(
    name: str,
    reward: float | None,
    error: str | None = None,
    kind: str = "RuntimeError",
    attempt: int = 0,
) -> dict:
    """A trial's result.json as Harbor 0.26 writes it (the fields the driver reads): its
    `reward_valid` and the exception's `policy` come from Harbor's error policy table; the
    `attempt`-th trial of its task started `attempt` seconds after the first."""
    valid_kinds = {"AgentTimeoutError": True, "RuntimeError": True}  # unknown types keep it
    document = {
        "task_name": name,
        "trial_name": f"{name}__{'zyx'[attempt % 3]}{attempt}",
        "started_at": f"2026-11-30T15:00:{attempt:02d}.000000Z",
        "verifier_result": None,
    }
    if reward is not None:
        document["verifier_result"] = {"rewards": {"reward": reward}}
    keeps = valid_kinds.get(kind, False)
    if error:
        document["exception_info"] = {
            "exception_type": kind,
            "exception_message": error,
            "policy": {"should_retry": not keeps, "should_grade": keeps, "has_valid_reward": keeps},
        }
    document["reward_valid"] = reward is not None and (not error or keeps)
    return document


def write_job(jobs: Path, *trials: dict) -> None:
    job = jobs / "2026-11-30__15-00-00"
    for document in trials:
        (job / document["trial_name"]).mkdir(parents=True)
        (job / document["trial_name"] / "result.json").write_text(json.dumps(document))
    stats = {"evals": {"oracle__sample": {"metrics": [{"mean": 1 / 3}]}}}
    (job / "result.json").write_text(json.dumps({"stats": stats}))


def test_the_job_result_becomes_results_json(tmp_path):
    write_job(
        tmp_path / "jobs",
        trial("sum", 1.0),
        trial("hello", 0.0, "took too long", kind="AgentTimeoutError"),
        trial("capital", None, "FROM python:3.13-slim refused", kind="SandboxBuildFailedError"),
    )
    env = {**MANAGED, "HARBOR_AGENT": "oracle", "HARBOR_DATASET": "belvedir:env_1"}
    results = run.read_job(tmp_path / "jobs", env)
    assert results == {
        "score": 0.5,
        "grading": "pass@1",
        "attempts": 1,
        "pass_threshold": 0.5,
        "tasks": {
            "capital": {"attempts": [], "score": None, "errored": 1},
            "hello": {"attempts": [0.0], "score": 0.0, "errored": 0},
            "sum": {"attempts": [1.0], "score": 1.0, "errored": 0},
        },
        "errored": {"capital": "SandboxBuildFailedError: FROM python:3.13-slim refused"},
        "errors": {
            "capital": "SandboxBuildFailedError: FROM python:3.13-slim refused",
            "hello": "AgentTimeoutError: took too long",
        },
        "n_trials": 3,
        "n_scored": 2,
        "n_errored": 1,
        "agent": "oracle",
        "model": None,
        "dataset": "belvedir:env_1",
        "environment": "belvedir",
        "harbor_job": "2026-11-30__15-00-00",
        "n_tasks": 3,
    }


def test_a_trial_that_errored_is_not_a_zero_but_errored_with_its_reason(tmp_path):
    """Harbor's mean counts an errored trial 0 (1/3 here); the driver leaves it out."""
    write_job(
        tmp_path / "jobs",
        trial("sum", 1.0),
        trial("hello", None, "the verifier crashed", kind="VerifierOutputParseError"),
        trial("capital", 0.0, "no reward file", kind="RewardFileNotFoundError"),
    )
    results = run.read_job(tmp_path / "jobs", MANAGED)
    assert results["score"] == 1.0
    assert {name: task["score"] for name, task in results["tasks"].items()} == {
        "capital": None,
        "hello": None,
        "sum": 1.0,
    }
    assert results["errored"] == {
        "capital": "RewardFileNotFoundError: no reward file",
        "hello": "VerifierOutputParseError: the verifier crashed",
    }
    # A result from before Harbor wrote reward_valid: the exception's policy, else no reward.
    legacy = trial("late", None)
    del legacy["reward_valid"]
    write_job(tmp_path / "old", trial("sum", 1.0), legacy)
    assert run.read_job(tmp_path / "old", MANAGED)["errored"] == {
        "late": "the trial recorded no reward"
    }


def test_a_job_whose_every_trial_errored_has_no_score_and_the_driver_exits_3(
    tmp_path, monkeypatch, capsys
):
    write_job(
        tmp_path / "jobs",
        trial("sum", None, "FROM refused", kind="SandboxBuildFailedError"),
        trial("hello", None, "FROM refused", kind="SandboxBuildFailedError"),
    )
    results = run.read_job(tmp_path / "jobs", MANAGED)
    assert results["score"] is None
    assert {task["score"] for task in results["tasks"].values()} == {None}
    assert results["n_errored"] == results["n_trials"] == 2
    # main() end to end, with a stand-in `harbor` that leaves this job behind.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    harbor = bin_dir / "harbor"
    harbor.write_text(f"#!/bin/sh\ncp -r {tmp_path / 'jobs'}/. ./{run.JOBS_DIR}/\n")
    harbor.chmod(0o755)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("HARBOR_DATASET", "belvedir-sample")
    assert run.main([]) == 3
    written = json.loads((workdir / "results.json").read_text())
    assert written["score"] is None and set(written["errored"]) == {"sum", "hello"}
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == (
        "belvedir-harbor: every trial errored (2 of 2), so there is no score: see errored in "
        "results.json."
    )


def test_no_job_result_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="harbor wrote no job result"):
        run.read_job(tmp_path / "nothing", MANAGED)


# The Runner's own folding, fed the same scores a Harbor job's trials have as rewards.
SAME_REWARDS = {"sum": [1.0, 0.0, 0.0], "hello": [1.0, 1.0, 0.0], "capital": [0.0, 0.0, 0.0]}


def runners_folding(rule: str, scores: dict[str, list[float]]) -> dict:
    """results.json of the Belvedir Runner (its run_task and summary) whose judge gave each
    task's attempts these scores."""
    settings = runner.Settings.from_env(
        {
            "BELVEDIR_TASKS_FILE": "unused",
            "MODEL": "m",
            "JUDGE_MODEL": "judge",
            "BELVEDIR_TASK_ATTEMPTS": "3",
            "BELVEDIR_GRADING": rule,
        }
    )

    class Scripted(runner.Runner):
        def attempt(self, task, number):
            score = scores[task["id"]][number - 1]
            return {"attempt": number, "score": score, "passed": score >= settings.threshold}

    tasks = [{"id": name, "verifier": {"kind": "judge"}, "metadata": {}} for name in scores]
    scripted = Scripted(settings, tasks, tracing.Tracing({}))
    return runner.summary(settings, [scripted.run_task(task) for task in tasks], "off")


@pytest.mark.parametrize(
    ("rule", "sum_score", "hello_score"),
    [("pass@1", 1 / 3, 2 / 3), ("pass@k", 1.0, 1.0), ("mean", 1 / 3, 2 / 3)],
)
def test_three_attempts_fold_by_the_grading_rule_as_the_runner_folds_them(
    tmp_path, rule, sum_score, hello_score
):
    """3 attempts of a task that passes once: pass@1 1/3, pass@k 1, on Harbor as on the Runner
    (one definition: belvedir_runner.grading, which the Harbor driver imports)."""
    trials = [
        trial(name, reward, attempt=number)
        for name, rewards in SAME_REWARDS.items()
        for number, reward in enumerate(rewards)
    ]
    write_job(tmp_path / "jobs", *trials)
    env = {**MANAGED, "BELVEDIR_TASK_ATTEMPTS": "3", "BELVEDIR_GRADING": rule}
    results = run.read_job(tmp_path / "jobs", env)
    assert results["tasks"]["sum"] == {
        "attempts": [1.0, 0.0, 0.0],
        "score": sum_score,
        "errored": 0,
    }
    assert results["tasks"]["hello"]["score"] == pytest.approx(hello_score)
    assert results["tasks"]["capital"]["score"] == 0.0
    assert results["grading"] == rule and results["attempts"] == 3
    assert results["n_trials"] == results["n_scored"] == 9
    runners = runners_folding(rule, SAME_REWARDS)
    assert {t["id"]: t["score"] for t in runners["tasks"]} == {
        name: task["score"] for name, task in results["tasks"].items()
    }
    assert results["score"] == pytest.approx(runners["score"])
    assert run.grading is runner.grading


def test_an_errored_attempt_is_left_out_of_its_tasks_fold_not_counted_zero(tmp_path):
    write_job(
        tmp_path / "jobs",
        trial("sum", 0.0, attempt=0),
        trial("sum", None, "the verifier crashed", kind="VerifierOutputParseError", attempt=1),
        trial("sum", 1.0, attempt=2),
        trial("hello", None, "FROM refused", kind="SandboxBuildFailedError", attempt=0),
        trial("hello", None, "FROM refused", kind="SandboxBuildFailedError", attempt=1),
    )
    env = {**MANAGED, "BELVEDIR_TASK_ATTEMPTS": "3", "BELVEDIR_GRADING": "pass@1"}
    results = run.read_job(tmp_path / "jobs", env)
    assert results["tasks"] == {
        "hello": {"attempts": [], "score": None, "errored": 2},
        "sum": {"attempts": [0.0, 1.0], "score": 0.5, "errored": 1},
    }
    assert results["score"] == 0.5
    assert results["errored"] == {"hello": "SandboxBuildFailedError: FROM refused"}
    assert results["n_trials"] == 5 and results["n_scored"] == 2 and results["n_errored"] == 3
    # The platform reads each task's score, and counts hello errored, sum scored.
    assert task_results(results) == {"hello": None, "sum": 0.5}


def test_the_runs_attempts_are_harbors_trials_per_task(tmp_path):
    env = {"HARBOR_DATASET": "belvedir-sample", "HARBOR_AGENT": "oracle"}
    one = run.harbor_command(env, run.SAMPLE_DIR, tmp_path)
    assert "--n-attempts" not in one
    three = run.harbor_command({**env, "BELVEDIR_TASK_ATTEMPTS": "3"}, run.SAMPLE_DIR, tmp_path)
    assert three[three.index("--n-attempts") + 1] == "3"


def test_a_capped_run_says_how_many_of_the_datasets_tasks_ran(tmp_path):
    write_job(tmp_path / "jobs", trial("sum", 1.0), trial("hello", 0.0))
    capped = {**MANAGED, "HARBOR_N_TASKS": "2"}
    results = run.read_job(tmp_path / "jobs", capped, dataset_tasks=20)
    assert results["n_tasks"] == 2 and results["n_tasks_total"] == 20
    assert results["task_limit"] == "HARBOR_N_TASKS=2"
    # No cap, or the tasks picked by name: nothing was left out by a limit.
    for env in (MANAGED, {**capped, "HARBOR_TASK_NAMES": "sum,hello"}):
        results = run.read_job(tmp_path / "jobs", env, dataset_tasks=20)
        assert results["n_tasks"] == 2 and "n_tasks_total" not in results
    assert run.dataset_size(run.SAMPLE_DIR) == 3 and run.dataset_size(None) is None


@pytest.mark.parametrize("agent", sorted(agents.DOWNLOADED_AGENTS))
def test_an_agent_that_downloads_itself_fails_fast_offline_naming_what_it_needed(
    agent, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(agents, "NPM_REGISTRY_URL", f"http://127.0.0.1:{free_port()}/")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARBOR_DATASET", "belvedir-sample")
    monkeypatch.setenv("HARBOR_AGENT", agent)
    assert run.main(["--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"belvedir-harbor: HARBOR_AGENT {agent} installs itself in each task")
    assert agents.DOWNLOADED_AGENTS[agent] in err and "an offline install" in err
    # Online, or on your own Modal account: nothing refused.
    run.agent_downloads_check(
        {"HARBOR_AGENT": agent, "MODAL_TOKEN_ID": "a", "MODAL_TOKEN_SECRET": "b"}
    )
    for offline_ok in ("belvedir", "terminus-2", "oracle", "nop"):
        run.agent_downloads_check({"HARBOR_AGENT": offline_ok})


def test_claude_code_gets_the_model_settings_as_anthropics_key_and_base(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own = {"HARBOR_AGENT": "claude-code", "MODEL_API_KEY": "sk-or-own"}
    out = run.harbor_env(own)
    # OpenRouter (the default base) serves Anthropic's Messages API at /api.
    assert out["ANTHROPIC_API_KEY"] == "sk-or-own"
    assert out["ANTHROPIC_BASE_URL"] == "https://openrouter.ai/api"
    anthropic = {**own, "MODEL_API_BASE": "https://api.anthropic.com/v1/"}
    assert run.harbor_env(anthropic)["ANTHROPIC_BASE_URL"] == "https://api.anthropic.com"
    # OPENROUTER_API_KEY stands in for a blank MODEL_API_KEY; an Anthropic variable set wins.
    assert (
        run.harbor_env({"HARBOR_AGENT": "claude-code", "OPENROUTER_API_KEY": "sk-or"})[
            "ANTHROPIC_API_KEY"
        ]
        == "sk-or"
    )
    assert run.harbor_env({**own, "ANTHROPIC_API_KEY": "sk-ant"})["ANTHROPIC_API_KEY"] == "sk-ant"
    # Other agents get none of it.
    assert "ANTHROPIC_API_KEY" not in run.harbor_env({**own, "HARBOR_AGENT": "terminus-2"})
    # A covered run: the run's own key and the router, which serves Anthropic's Messages API.
    router = MANAGED["BELVEDIR_BASE_URL"] + "/api/v1"
    covered = {**own, **MANAGED, "MODEL_API_KEY": MANAGED["BELVEDIR_API_KEY"]}
    assert run.harbor_env({**covered, "MODEL_API_BASE": router})["ANTHROPIC_BASE_URL"] == (
        MANAGED["BELVEDIR_BASE_URL"] + "/api"
    )
    assert run.anthropic_settings(covered)["ANTHROPIC_API_KEY"] == MANAGED["BELVEDIR_API_KEY"]
