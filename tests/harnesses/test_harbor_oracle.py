"""The Harbor export checked with Harbor itself: an environment holding all four verifier kinds,
exported with `belvedir environments export` from a live server; Harbor's task model loads every
exported task, and `harbor run -a oracle` on this machine's Docker engine scores 1.0, the judge
being a local test server that Harbor's verifier reaches with the key from the host's environment
(the export never holds it)."""

import pytest

from harnesses.environments import environment_create
from harnesses.harbor_export import ANSWER_LINE
from tests.helpers.harbor import FOUR_KINDS, harbor_image, load_tasks, mean_reward, run_job
from tests.traces.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JUDGE_KEY = "sk-judge-from-the-host"


@pytest.fixture(scope="module")
def image():
    return harbor_image()


def test_harbor_loads_every_task_and_the_oracle_scores_one(image, cli, owner, settings, tmp_path):
    settings.BELVEDIR_EXPORT_BASE_IMAGE = "belvedir-sandbox:latest"  # no registry here
    environment = environment_create(
        project=owner.project, created_by=owner.user, name="Four kinds", tasks=FOUR_KINDS
    )
    out = tmp_path / "env"
    code, _, err = cli(
        "environments", "export", owner.project.pk, "--id", environment.pk, "--out", str(out)
    )
    assert code == 0, err
    task_dirs = sorted(p for p in out.iterdir() if p.is_dir())
    exported = b"".join(p.read_bytes() for p in (tmp_path / "env").rglob("*") if p.is_file())
    assert JUDGE_KEY.encode() not in exported

    loaded = load_tasks(image, tmp_path, task_dirs)
    assert set(loaded) == {"capital", "refund", "sum", "todo"}
    assert all(task["valid"] for task in loaded.values())
    assert {task["instruction_ends"] for task in loaded.values()} == {ANSWER_LINE}
    assert loaded["refund"]["verifier_env"]["JUDGE_API_KEY"] == "${JUDGE_API_KEY}"

    with FakeOpenAI(reply='{"score": 1, "reason": "matches the reference"}') as judge:
        env = {"JUDGE_API_KEY": JUDGE_KEY, "JUDGE_MODEL": "acme/judge"}
        env["JUDGE_API_BASE"] = judge.base_url
        oracle = run_job(image, tmp_path, tmp_path / "env", "oracle", env)
        judged = list(judge.requests)
        nop = run_job(image, tmp_path, tmp_path / "env", "nop", env)

    assert mean_reward(oracle) == 1.0, oracle["log"]
    assert oracle["trials"] == {"capital": 1.0, "refund": 1.0, "sum": 1.0, "todo": 1.0}
    # The judge was asked twice (judge and rubric), with the host's key, about the oracle's answers.
    assert len(judged) == 2
    assert {r["headers"]["Authorization"] for r in judged} == {f"Bearer {JUDGE_KEY}"}
    prompts = "\n".join(r["body"]["messages"][-1]["content"] for r in judged)
    assert "## Candidate answer\nParis" in prompts and "Offers credit" in prompts
    # Without the oracle's answer and files, the deterministic verifiers score 0.
    assert nop["trials"]["sum"] == 0.0 and nop["trials"]["todo"] == 0.0
