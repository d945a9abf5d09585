"""The run page's "Harness contract" disclosure: the names of the environment variables the
run's sandbox is given (the executor's own run_sandbox_env), never a value, with links to the
contract, the Node SDK and the Fractal migration pages the platform serves."""

import re

import pytest

from belvedir import crypto
from harnesses.services import harness_create
from runs import services as run_services
from runs.contract import run_model_secrets, run_sandbox_env, run_sandbox_env_names
from tests.runs.helpers import EXAMPLES, git_repo_of

pytestmark = pytest.mark.django_db(transaction=True)

MODEL_KEY = "sk-launch-model-key-0001"
HARNESS_SECRET = "sk-harness-secret-0002"


@pytest.fixture
def run(owner, tmp_path, django_capture_on_commit_callbacks):
    harness = harness_create(
        project=owner.project,
        name="contract",
        repo_url=git_repo_of(EXAMPLES / "contract-harness", tmp_path / "repo"),
        run_command="python3 run.py",
        env={"OPENAI_API_KEY": HARNESS_SECRET, "SUITE": "small"},
        tasks="What is 2+2?",
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=False):
        return run_services.run_launch(
            project=owner.project,
            harness=harness,
            created_by=owner.user,
            model="gpt-4o-mini",
            model_api_base="http://127.0.0.1:9/v1",
            model_api_key=MODEL_KEY,
        )


def listed(html: str) -> list[str]:
    section = html[html.index('<details id="run-contract">') :]
    section = section[: section.index("</details>")]
    return re.findall(r"<li>([A-Z0-9_]+)</li>", section)


@pytest.mark.docker
def test_the_contract_lists_the_names_the_sandbox_gets_and_no_value(owner, run):
    html = owner.web.get(f"/runs/{run.pk}/").content.decode()
    names = listed(html)
    # The executor's env, by name: exactly what the sandbox is given.
    assert names == sorted(run_sandbox_env(run, secrets=run_model_secrets(run)))
    assert names == run_sandbox_env_names(run)
    for name in ["BELVEDIR_API_KEY", "BELVEDIR_RUN_ID", "BELVEDIR_TASKS_FILE", "MODEL_API_KEY"]:
        assert name in names
    assert {"FRACTAL_API_KEY", "OPENAI_API_KEY", "SUITE"} <= set(names)
    assert f"the {len(names)} environment variables" in html
    for secret in (MODEL_KEY, HARNESS_SECRET, crypto.decrypt(run.run_key_encrypted)):
        assert secret not in html


@pytest.mark.docker
def test_the_contract_links_pages_the_platform_serves(owner, run):
    html = owner.web.get(f"/runs/{run.pk}/").content.decode()
    section = html[html.index('<details id="run-contract">') :]
    links = re.findall(r'href="(/docs/[^"]+)"', section[: section.index("</details>")])
    assert links == [
        "/docs/harness-contract.md",
        "/docs/sdk-node.md",
        "/docs/migrating-from-fractal.md",
    ]
    for link in links:
        assert owner.web.get(link).status_code == 200, link


def test_a_run_without_a_key_or_tasks_lists_neither(owner, make_run):
    bare = make_run(status="succeeded", model="m")
    names = listed(owner.web.get(f"/runs/{bare.pk}/").content.decode())
    assert "BELVEDIR_RUN_ID" in names and "MODEL" in names
    assert not {"BELVEDIR_TASKS_FILE", "MODEL_API_KEY", "OPENAI_API_KEY"} & set(names)


@pytest.mark.docker
def test_an_outsider_gets_a_404(outsider, run):
    assert outsider.web.get(f"/runs/{run.pk}/").status_code == 404
