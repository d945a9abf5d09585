"""The `belvedir` CLI against a live server: catalog, benchmarks add/list, readable errors."""

import json

import pytest
from django.conf import settings

from belvedir.cli import main
from harnesses.models import Harness

TASKS = '[{"id": "t1", "prompt": "Say hi", "rubric": "Says hi."}]\n'


def test_catalog_lists_every_card_and_marks_the_unavailable_ones(cli):
    code, out, _ = cli("catalog")
    assert code == 0
    assert "Suites:" in out and "Agent scaffolds:" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "not yet available" not in lines["openclaw"]
    assert "(not yet available)" in lines["mastra"]
    assert "harbor-runner" in lines


def test_catalog_as_json_for_scripts(cli):
    code, out, _ = cli("catalog", "--json")
    assert code == 0
    groups = json.loads(out)["groups"]
    assert [g["group"] for g in groups][0] == "Suites"


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_benchmarks_add_from_a_preset_with_env_and_a_tasks_file(cli, owner, tmp_path):
    tasks = tmp_path / "tasks.json"
    tasks.write_text(TASKS)
    code, out, err = cli(
        "benchmarks",
        "add",
        "--preset",
        "openclaw",
        "--env",
        "HARBOR_N_TASKS=2",
        "--tasks-file",
        str(tasks),
    )
    assert code == 0, err
    harness = Harness.objects.get(project=owner.project)
    assert out.strip() == f"created {harness.pk}  OpenClaw"
    assert harness.preset == "openclaw"
    assert harness.env == {
        "HARBOR_AGENT": "openclaw",
        "JUDGE_MODEL": settings.BELVEDIR_DEFAULT_JUDGE_MODEL,
        "HARBOR_N_TASKS": "2",
    }  # the card's env (its judge the platform's default), overridden
    assert harness.tasks == TASKS


def test_benchmarks_add_from_flags(cli, owner):
    code, out, err = cli(
        "benchmarks",
        "add",
        "--name",
        "Flags",
        "--repo",
        "git@github.com:example/h.git",
        "--ref",
        "v1",
        "--install",
        "pip install .",
        "--run",
        "python -m h",
        "--compute",
        "gpu",
        "--env",
        "MODEL=meta-llama/Llama-3.1-8B",
        "--env",
        "EXTRA=a=b",
    )
    assert code == 0, err
    harness = Harness.objects.get(name="Flags")
    assert (harness.repo_url, harness.ref, harness.compute, harness.gpu_type) == (
        "git@github.com:example/h.git",
        "v1",
        "gpu",
        "A10G",
    )
    assert harness.env == {"MODEL": "meta-llama/Llama-3.1-8B", "EXTRA": "a=b"}
    assert harness.preset == ""


def test_benchmarks_list_json_lists_the_projects_harnesses(cli, owner, harness):
    code, out, _ = cli("benchmarks", "list", "--json")
    assert code == 0
    body = json.loads(out)
    assert [h["id"] for h in body["results"]] == [harness.pk]
    assert body["results"][0]["env"] == {"MODEL": "openai/gpt-4.1-mini"}
    code, out_before, _ = cli("--json", "benchmarks", "list")
    assert json.loads(out_before) == body


def test_benchmarks_list_as_text(cli, harness):
    code, out, _ = cli("benchmarks", "list")
    assert code == 0 and harness.pk in out and "Smoke" in out


def test_an_unavailable_preset_exits_non_zero_naming_the_card(cli, owner):
    code, out, err = cli("benchmarks", "add", "--preset", "mastra")
    assert code != 0
    assert "Mastra" in err and "not yet available" in err
    assert "Traceback" not in err and out == ""
    assert not Harness.objects.exists()


def test_an_unavailable_preset_with_env_is_refused_too(cli):
    code, _, err = cli("benchmarks", "add", "--preset", "lm-eval", "--env", "X=1")
    assert code != 0 and "lm-eval" in err


def test_a_refused_env_key_exits_non_zero_naming_the_key(cli):
    code, _, err = cli("benchmarks", "add", "--preset", "pi", "--env", "PATH=/opt/bin")
    assert code != 0
    assert "PATH" in err and "env" in err
    assert not Harness.objects.exists()


def test_a_malformed_env_pair_is_refused_before_calling_the_server(cli):
    code, _, err = cli("benchmarks", "add", "--preset", "pi", "--env", "NOEQUALS")
    assert code != 0 and "KEY=VALUE" in err


def test_a_missing_tasks_file_is_a_readable_error(cli, tmp_path):
    code, _, err = cli(
        "benchmarks", "add", "--preset", "pi", "--tasks-file", str(tmp_path / "nope.json")
    )
    assert code != 0 and "nope.json" in err and "Traceback" not in err


def test_missing_fields_from_flags_name_the_field(cli):
    code, _, err = cli("benchmarks", "add", "--name", "Half")
    assert code != 0 and "repo_url" in err


def test_a_revoked_key_is_a_readable_401(cli, owner):
    owner.api.delete(f"/api/v1/keys/{owner.project.api_keys.get().pk}")
    code, _, err = cli("benchmarks", "list")
    assert code != 0 and "401" in err


def test_without_a_key_the_cli_says_how_to_configure_it(monkeypatch, capsys):
    monkeypatch.delenv("BELVEDIR_API_KEY", raising=False)
    assert main(["catalog"]) == 2
    assert "BELVEDIR_API_KEY" in capsys.readouterr().err


def test_an_unreachable_server_is_a_readable_error(monkeypatch, capsys):
    monkeypatch.setenv("BELVEDIR_API_KEY", "bv_live_whatever")
    monkeypatch.setenv("BELVEDIR_URL", "http://127.0.0.1:9")
    assert main(["catalog"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach http://127.0.0.1:9" in err


def test_the_console_script_is_declared():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["belvedir"] == "belvedir.cli:main"


def test_runs_launch_takes_the_model_key_from_the_environment(monkeypatch):
    from belvedir.cli import build_parser, runs

    sent = {}

    class FakeClient:
        def post(self, path, json):
            sent.update(json)
            return {"id": "run_x", "status": "queued"}

    monkeypatch.setenv("MODEL_API_KEY", "sk-from-env")
    args = build_parser().parse_args(["runs", "launch", "har_x", "--model", "m"])
    assert runs.cmd_runs_launch(FakeClient(), args) == 0
    assert sent["model_api_key"] == "sk-from-env" and "judge_api_key" not in sent


def test_the_cli_imports_nothing_from_django():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, belvedir.cli; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_python_dash_m_belvedir_cli_runs_the_same_command_line():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "belvedir.cli", "catalog"],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
    )
    assert result.returncode == 2
    assert "set BELVEDIR_API_KEY" in result.stderr


def test_runs_list_and_get_show_the_score_with_the_pages_precision(cli, owner):
    from runs.models import Run

    scored = Run.objects.create(
        project=owner.project, harness_name="h", status="succeeded", score=0.85
    )
    failed = Run.objects.create(project=owner.project, harness_name="h", status="failed")
    code, out, _ = cli("runs", "list")
    assert code == 0
    assert f"{scored.pk}  succeeded  score=0.850  h" in out
    assert f"{failed.pk}  failed     score=—  h" in out
    code, out, _ = cli("runs", "get", scored.pk)
    assert out.splitlines()[0] == f"{scored.pk}  succeeded  score=0.850"
    code, out, _ = cli("runs", "get", scored.pk, "--json")
    assert json.loads(out)["score"] == 0.85  # the API's number, untouched


def test_runs_list_and_get_show_the_score_with_its_standard_error_and_interval(cli, owner):
    from runs.models import Run

    # 31 of 50 tasks passed (tests/runs/test_score_error_bars.py)
    bar = {"score_stderr": 0.069341, "score_ci_low": 0.484093, "score_ci_high": 0.755907}
    run = Run.objects.create(
        project=owner.project, harness_name="h", status="succeeded", score=0.62, n_tasks=50, **bar
    )
    code, out, _ = cli("runs", "list")
    assert code == 0 and f"{run.pk}  succeeded  score=0.620 ± 0.069  h" in out
    code, out, _ = cli("runs", "get", run.pk)
    assert out.splitlines()[0] == (
        f"{run.pk}  succeeded  score=0.620 ± 0.069 (95% CI 0.484–0.756, 50 tasks)"
    )


def test_runs_compare_prints_the_paired_comparison_and_the_unshared_tasks(cli, owner, outsider):
    from runs.models import Run

    # tests/scores/test_paired_stats.py's five tasks, each run with one task of its own
    a_tasks = {"t1": 1.0, "t2": 0.0, "t3": 1.0, "t4": 1.0, "t5": 0.0, "only-a": 1.0}
    b_tasks = {"only-b": 0.0, "t1": 1.0, "t2": 1.0, "t3": 1.0, "t4": 0.0, "t5": 1.0}
    a, b = (
        Run.objects.create(
            project=owner.project,
            harness_name="h",
            status="succeeded",
            score=sum(tasks.values()) / 6,
            model=model,
            results={"tasks": tasks},
        )
        for tasks, model in ((a_tasks, "m/a"), (b_tasks, "m/b"))
    )
    code, out, _ = cli("runs", "compare", a.pk, b.pk)
    assert code == 0
    assert out.splitlines() == [
        f"A {a.pk}  score=0.667  h  m/a",
        f"B {b.pk}  score=0.667  h  m/b",
        "A and B are not distinguishable on these 5 tasks: about 138 tasks would be needed to "
        "tell a difference this size (0.200).",
        "B - A +0.200 ± 0.374 (95% CI -0.533 to +0.933), p 0.593 (two-sided, normal approximation)",
        "tasks: B won 2, tied 2, A won 1 of 5",
        "only in A, not compared (1): only-a",
        "only in B, not compared (1): only-b",
    ]
    code, out, _ = cli("--json", "runs", "compare", a.pk, b.pk)
    assert json.loads(out)["tasks_needed"] == 138

    bare = Run.objects.create(project=owner.project, harness_name="h", status="succeeded")
    code, out, _ = cli("runs", "compare", a.pk, bare.pk)
    assert code == 0
    assert f"No paired comparison: run B ({bare.pk}) has no per-task results" in out

    theirs = Run.objects.create(project=outsider.project, harness_name="h", status="succeeded")
    code, _, err = cli("runs", "compare", a.pk, theirs.pk)
    assert code == 1 and "HTTP 404" in err
    code, _, err = cli("runs", "compare", a.pk, a.pk)
    assert code == 1 and "HTTP 400: runs: Give two different run ids to compare" in err
