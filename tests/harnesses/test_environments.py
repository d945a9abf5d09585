"""Environments: created at version 1, a new version on each change, and harnesses backed by
them from the Runner cards only."""

import json

import pytest

from belvedir.errors import Invalid
from harnesses import environments
from harnesses.models import EnvironmentVersion

TASKS = [
    {"id": "capital", "prompt": "Capital of France?", "answer": "Paris"},
    {
        "id": "refund",
        "prompt": "A refund after 40 days?",
        "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy"]},
    },
]
CODE_TASK = {
    "id": "sum",
    "prompt": "2+2?",
    "answer": "4",
    "verifier": {
        "kind": "code",
        "source": "def verify(answer, state):\n    return answer == '4'\n",
    },
}


@pytest.fixture
def environment(owner):
    return environments.environment_create(
        project=owner.project, name="Support", description="Refunds", tasks=TASKS
    )


def test_a_new_environment_is_version_1_with_its_tasks(environment):
    assert environment.id.startswith("env_")
    assert (environment.version, environment.task_count) == (1, 2)
    tasks = environments.environment_tasks(environment=environment)
    assert tasks[0]["verifier"] == {"kind": "judge"}
    assert [v.number for v in environment.versions.all()] == [1]


def test_an_environment_imports_a_tasks_files_text(owner):
    env = environments.environment_create(
        project=owner.project, name="Lines", tasks="What is 2+2?\nName a prime.\n"
    )
    assert [t["id"] for t in environments.environment_tasks(environment=env)] == [
        "task-1",
        "task-2",
    ]


def test_each_change_is_a_new_version_and_old_versions_keep_their_tasks(environment):
    changed = environments.environment_update(environment=environment, tasks=TASKS[:1])
    assert (changed.version, changed.task_count) == (2, 1)
    renamed = environments.environment_update(environment=changed, name="Support v2")
    assert renamed.version == 3
    assert len(environments.environment_tasks(environment=renamed, number=1)) == 2
    assert len(environments.environment_tasks(environment=renamed)) == 1
    assert list(renamed.versions.values_list("number", "name")) == [
        (3, "Support v2"),
        (2, "Support"),
        (1, "Support"),
    ]


def test_saving_without_a_change_makes_no_new_version(environment):
    same = environments.environment_update(
        environment=environment, name="Support", description="Refunds", tasks=json.dumps(TASKS)
    )
    assert same.version == 1
    assert EnvironmentVersion.objects.filter(environment=environment).count() == 1


def test_a_bad_update_changes_nothing(environment):
    with pytest.raises(Invalid) as caught:
        environments.environment_update(
            environment=environment, tasks=[{"id": "x", "prompt": "p", "verifier": {"kind": "?"}}]
        )
    assert caught.value.field == "tasks[0].verifier.kind"
    environment.refresh_from_db()
    assert environment.version == 1


def test_names_are_unique_in_a_project(owner, environment):
    with pytest.raises(Invalid) as caught:
        environments.environment_create(project=owner.project, name="Support", tasks=TASKS)
    assert caught.value.field == "name"


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_runner_on_harbor_harness_gets_the_cards_fields_and_the_environments_tasks(
    owner, environment
):
    harness = environments.environment_harness_create(
        environment=environment, preset="harbor-runner", created_by=owner.user
    )
    assert harness.preset == "harbor-runner"
    assert harness.name == "Support · Belvedir Runner on Harbor"
    assert harness.env["HARBOR_AGENT"] == "belvedir"
    assert json.loads(harness.tasks) == environments.environment_tasks(environment=environment)
    again = environments.environment_harness_create(environment=environment, preset="harbor-runner")
    assert again.name == "Support · Belvedir Runner on Harbor (2)"


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_harness_records_the_environment_and_version_it_was_made_from(owner, environment):
    harness = environments.environment_harness_create(
        environment=environment, preset="harbor-runner"
    )
    environments.environment_update(environment=environment, description="changed")
    environment.refresh_from_db()
    harness.refresh_from_db()
    assert (harness.environment_id, harness.environment_version) == (environment.pk, 1)
    assert environment.version == 2
    page = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert f"/environments/{environment.pk}" in page and "v1" in page
    assert owner.api.get(f"/api/v1/harnesses/{harness.pk}").json()["environment_version"] == 1
    environments.environment_delete(environment=environment)
    harness.refresh_from_db()
    assert (harness.environment_id, harness.environment_version) == (None, 1)


@pytest.mark.parametrize(
    ("preset", "words"),
    [
        ("mastra", "The Mastra card is not yet available"),
        ("lm-eval", "lm-eval (vLLM-served) card is not yet available"),
        ("swe-bench-verified", "The SWE-bench Verified card brings its own tasks"),
        ("nope", "There is no catalog card 'nope'"),
    ],
)
def test_cards_that_cannot_back_an_environment_are_refused_by_name(environment, preset, words):
    with pytest.raises(Invalid) as caught:
        environments.environment_harness_create(environment=environment, preset=preset)
    assert caught.value.field == "preset" and words in caught.value.message


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_the_one_sandbox_runner_refuses_code_tasks_naming_them(owner):
    env = environments.environment_create(
        project=owner.project, name="Mixed", tasks=[*TASKS, CODE_TASK]
    )
    with pytest.raises(Invalid) as caught:
        environments.environment_harness_create(environment=env, preset="runner")
    assert "(sum)" in caught.value.message and "Harbor" in caught.value.message
    harness = environments.environment_harness_create(environment=env, preset="harbor-runner")
    assert len(json.loads(harness.tasks)) == 3


def test_an_operator_renames_an_environment_in_the_admin_as_a_new_version(superuser, environment):
    from django.contrib.admin.utils import quote
    from django.urls import reverse

    url = reverse("admin:harnesses_environment_change", args=[quote(environment.pk)])
    assert superuser.get(url).status_code == 200
    response = superuser.post(url, {"name": "Renamed", "description": "Refunds"})
    assert response.status_code == 302
    environment.refresh_from_db()
    assert (environment.name, environment.version) == ("Renamed", 2)
    listed = superuser.get(
        reverse("admin:harnesses_environmentversion_changelist"),
        {"environment__id__exact": environment.pk},
    )
    assert listed.status_code == 200 and "Renamed" in listed.content.decode()
    version = environment.versions.get(number=1)
    version_url = reverse("admin:harnesses_environmentversion_change", args=[version.pk])
    assert superuser.get(version_url).status_code == 200
