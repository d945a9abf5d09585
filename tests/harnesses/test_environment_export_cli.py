"""`belvedir environments export <project> --id ENV --out DIR [--limit N]` against a live
server: the API's zip unpacked into DIR, one Harbor task directory per task."""

import json
import os

import pytest

from harnesses.environments import environment_create
from tests.helpers.harbor import FOUR_KINDS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def environment(owner):
    return environment_create(
        project=owner.project, created_by=owner.user, name="Support desk", tasks=FOUR_KINDS
    )


def test_export_writes_one_task_directory_per_task(cli, owner, environment, tmp_path):
    out = tmp_path / "env"
    code, stdout, err = cli(
        "environments", "export", owner.project.pk, "--id", environment.pk, "--out", str(out)
    )
    assert code == 0, err
    assert f"exported 4 tasks to {out}" in stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "capital",
        "refund",
        "sum",
        "todo",
    ]
    assert os.access(out / "todo/solution/solve.sh", os.X_OK)
    assert os.access(out / "sum/tests/test.sh", os.X_OK)
    assert not os.access(out / "sum/task.toml", os.X_OK)
    assert (out / "todo/environment/state/notes/todo.txt").read_text() == (
        "[ ] buy milk\n[ ] walk the dog\n"
    )
    assert "${JUDGE_API_KEY}" in (out / "capital/task.toml").read_text()


def test_limit_and_the_project_name_and_json(cli, owner, environment, tmp_path):
    out = tmp_path / "smoke"
    code, stdout, err = cli(
        "environments",
        "export",
        owner.project.name,
        "--id",
        environment.pk,
        "--out",
        str(out),
        "--limit",
        "1",
        "--json",
    )
    assert code == 0, err
    assert json.loads(stdout)["tasks"] == ["capital"]
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "capital"]


def test_refusals_name_what_is_wrong(cli, owner, outsider, environment, tmp_path):
    out = str(tmp_path / "env")
    args = ("environments", "export", owner.project.pk, "--id", environment.pk, "--out", out)
    code, _, err = cli(
        "environments", "export", "someone-else", "--id", environment.pk, "--out", out
    )
    assert code == 1 and "not 'someone-else'" in err
    code, _, err = cli(*args, "--limit", "0")
    assert code == 1 and "limit" in err
    code, _, err = cli(*args[:4], "env_missing", "--out", out)
    assert code == 1 and "404" in err
    assert cli(*args)[0] == 0
    code, _, err = cli(*args)  # a second export into the same directory
    assert code == 1 and "already exists" in err
