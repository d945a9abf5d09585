"""A task's group (docs/tasks-format.md: `metadata.group`, or a top-level `group`) reaches
results.json through both drivers, so the platform clusters the score's standard error by it:
the Belvedir Runner run on the host against a scripted model and judge, and the Harbor driver
reading a job over the platform's own export of the same tasks."""

import json

import pytest

from belvedir.errors import Invalid
from harnesses.environment_export import tasks_export_files
from harnesses.tasks_format import parse_tasks
from scores import stats
from scores.results import score_uncertainty
from tests.drivers.helpers import ScriptedLLM
from tests.drivers.test_harbor_run import trial, write_job
from tests.drivers.test_runner_grading import run_runner

from belvedir_harbor import run as harbor_run  # isort: skip
from belvedir_harbor.dataset import task_groups  # isort: skip
from belvedir_runner.tasks import TasksError, parse_text  # isort: skip

# Two passages of two questions each: the first group answered well, the second badly.
TASKS = "\n".join(
    json.dumps(task)
    for task in [
        {"id": "p1-a", "prompt": "passage 1, question a", "group": "passage-1"},
        {"id": "p1-b", "prompt": "passage 1, question b", "group": "passage-1"},
        {"id": "p2-a", "prompt": "passage 2, question a", "metadata": {"group": "passage-2"}},
        {"id": "p2-b", "prompt": "passage 2, question b", "metadata": {"group": "passage-2"}},
    ]
)
SCRIPTS = {
    "passage 1, question a": ["good"],
    "passage 1, question b": ["good"],
    "passage 2, question a": ["bad"],
    "passage 2, question b": ["bad"],
}
GROUPS = {"p1-a": "passage-1", "p1-b": "passage-1", "p2-a": "passage-2", "p2-b": "passage-2"}
# Scores 1, 1, 0, 0: clustered by passage the standard error is 0.5; unclustered 0.289.
CLUSTERED = stats.clustered_stderr([1.0, 1.0, 0.0, 0.0], list(GROUPS.values()))


def assert_clustered_by_passage(results: dict) -> None:
    uncertainty = score_uncertainty(results, score=results["score"], grading="pass@1", k=1)
    assert uncertainty.estimate is not None, uncertainty.why_none
    assert uncertainty.estimate.clusters == 2
    assert uncertainty.estimate.stderr == pytest.approx(CLUSTERED) == pytest.approx(0.5)
    plain = score_uncertainty(
        {"score": results["score"], "tasks": {t: 1.0 if "p1" in t else 0.0 for t in GROUPS}},
        score=results["score"],
        grading="pass@1",
        k=1,
    )
    assert plain.estimate.clusters is None and plain.estimate.stderr < 0.3


def test_the_runner_writes_each_tasks_group_and_the_score_is_clustered_by_it(tmp_path):
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
            },
            tasks=TASKS,
        )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["score"] == 0.5
    assert {t["id"]: t.get("group") for t in results["tasks"]} == GROUPS
    assert_clustered_by_passage(results)


def test_the_harbor_driver_writes_the_group_the_platforms_export_put_in_task_toml(tmp_path):
    dataset = tmp_path / "dataset"
    for file in tasks_export_files(parse_tasks(TASKS)):
        (dataset / file.path).parent.mkdir(parents=True, exist_ok=True)
        (dataset / file.path).write_bytes(file.content)
    assert 'group = "passage-1"' in (dataset / "p1-a" / "task.toml").read_text()
    # A task Harbor names by its [task] name, and one without a group.
    (dataset / "named").mkdir()
    (dataset / "named" / "task.toml").write_text(
        '[task]\nname = "org/named"\n\n[metadata]\ngroup = 7\n'
    )
    (dataset / "plain").mkdir()
    (dataset / "plain" / "task.toml").write_text("[metadata]\ntask_id = 'plain'\n")
    groups = task_groups(dataset)
    assert groups == {**GROUPS, "org/named": "7"}
    assert task_groups(None) == {} and task_groups(tmp_path / "missing") == {}

    write_job(
        tmp_path / "jobs",
        *(trial(name, 1.0 if name.startswith("p1") else 0.0) for name in GROUPS),
        trial("plain", 1.0),
    )
    results = harbor_run.read_job(tmp_path / "jobs", {"HARBOR_AGENT": "oracle"}, 6, groups)
    assert {name: task.get("group") for name, task in results["tasks"].items()} == {
        **GROUPS,
        "plain": None,
    }
    del results["tasks"]["plain"]
    results["score"] = 0.5
    assert_clustered_by_passage(results)


@pytest.mark.parametrize("group", [["a"], {"a": 1}, True])
def test_a_group_that_is_not_text_is_refused_by_the_platform_and_the_runner(group):
    text = json.dumps([{"id": "q", "prompt": "p", "metadata": {"group": group}}])
    with pytest.raises(Invalid, match="metadata.group must be text") as refused:
        parse_tasks(text)
    assert refused.value.field == "tasks[0].metadata.group"
    with pytest.raises(TasksError, match="task q: metadata.group must be text"):
        parse_text(text)
    top_level = json.dumps([{"id": "q", "prompt": "p", "group": group}])
    with pytest.raises(TasksError, match="metadata.group"):
        parse_text(top_level)
