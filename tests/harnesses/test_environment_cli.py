"""`belvedir environments list|create|show|generate|save` against a live server; generation
runs as a job on the real housekeeping cluster, against a scripted test model."""

import json

import pytest

from harnesses.models import Environment, EnvironmentGeneration, Harness
from tests.helpers.scripted_model import ScriptedModel
from tests.runs.helpers import start_qcluster, stop_qcluster

TASKS = [
    {"id": "capital", "prompt": "Capital of France?", "answer": "Paris"},
    {
        "id": "refund",
        "prompt": "A refund after 40 days?",
        "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy"]},
    },
]


@pytest.fixture
def tasks_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in TASKS) + "\n")
    return path


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_create_list_and_show(cli, owner, tasks_file):
    code, out, err = cli(
        "environments",
        "create",
        "--name",
        "Support",
        "--tasks-file",
        str(tasks_file),
        "--preset",
        "harbor-runner",
    )
    assert code == 0, err
    environment = Environment.objects.get(project=owner.project)
    harness = Harness.objects.get(project=owner.project)
    assert out.splitlines() == [
        f"created {environment.pk}  Support  v1, 2 tasks",
        f"harness {harness.pk}  Support · Belvedir Runner on Harbor",
    ]
    assert harness.preset == "harbor-runner" and json.loads(harness.tasks)[0]["id"] == "capital"
    code, out, _ = cli("environments", "list")
    assert code == 0 and out.split()[:2] == [environment.pk, "Support"]
    owner.api.patch(f"/api/v1/environments/{environment.pk}", {"tasks": TASKS[:1]}, format="json")
    code, out, _ = cli("environments", "show", environment.pk)
    assert code == 0 and "v2, 1 tasks" in out and "refund" not in out
    code, out, _ = cli("environments", "show", environment.pk, "--version", "1", "--json")
    assert code == 0 and [t["id"] for t in json.loads(out)["tasks"]] == ["capital", "refund"]


def test_a_bad_tasks_file_is_refused_naming_the_task_and_field(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "sum", "prompt": "2+2", "verifier": {"kind": "code"}}]))
    code, _, err = cli("environments", "create", "--name", "Bad", "--tasks-file", str(bad))
    assert code == 1
    assert "tasks[0].verifier.source: tasks[0] (id 'sum'): verifier.source is required" in err
    code, _, err = cli("environments", "create", "--name", "X", "--tasks-file", "/nonexistent")
    assert code == 1 and "--tasks-file" in err


@pytest.fixture
def housekeeping(cli, tmp_path):
    """The housekeeping cluster, which runs generation jobs, on this test's database."""
    log = tmp_path / "housekeeping.log"
    process = start_qcluster("housekeeping", log)
    yield log
    stop_qcluster(process)


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_generate_with_a_scripted_model_on_the_housekeeping_cluster(cli, owner, housekeeping):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        code, out, err = cli(
            "environments",
            "generate",
            "Geography and refunds",
            "--model",
            "acme/writer-1",
            "--model-api-base",
            model.base_url,
            "--model-api-key",
            "sk-test",
            "--name",
            "Generated",
            "--count",
            "2",
            "--preset",
            "harbor-runner",
            "--yes",
        )
    assert code == 0, err + housekeeping.read_text()
    generation = EnvironmentGeneration.objects.get(project=owner.project)
    assert f"{generation.pk}: Queued." in err or f"{generation.pk}: Asking" in err
    environment = Environment.objects.get(project=owner.project)
    harness = Harness.objects.get(project=owner.project)
    lines = out.splitlines()
    assert lines[0] == f"{generation.pk}: 2 tasks"
    assert lines[1].split()[:2] == ["capital", "judge"]
    assert lines[-2:] == [
        f"created {environment.pk}  Generated  v1, 2 tasks",
        f"harness {harness.pk}  Generated · Belvedir Runner on Harbor",
    ]


def test_generate_without_yes_only_previews_and_save_keeps_it_later(cli, owner, housekeeping):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        args = ["environments", "generate", "Refunds", "--model", "acme/writer-1"]
        code, out, err = cli(*args, "--model-api-base", model.base_url, "--name", "Later")
    assert code == 0, err
    generation = EnvironmentGeneration.objects.get(project=owner.project)
    assert f"not saved; save them with `belvedir environments save {generation.pk}`" in err
    assert not Environment.objects.exists()
    code, out, err = cli("environments", "save", generation.pk)
    assert code == 0, err
    assert Environment.objects.get(project=owner.project).name == "Later"


def test_a_failed_generation_exits_non_zero_with_its_error(cli, owner, housekeeping):
    with ScriptedModel(["no tasks here"]) as model:
        code, _, err = cli(
            "environments",
            "generate",
            "Refunds",
            "--model",
            "acme/writer-1",
            "--model-api-base",
            model.base_url,
        )
    assert code == 1
    assert "failed: The model's tasks were not valid: The answer holds no JSON list" in err
