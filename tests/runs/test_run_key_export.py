"""A run's own key exports only the environment its run names (least privilege): the one its
harness snapshot names in HARBOR_DATASET=belvedir:<id> (what the Harbor driver fetches), or
the one its harness was made from. Every other environment of its project is a 404 for it,
as another project's is; project keys and members keep their access."""

import io
import tomllib
import zipfile

import pytest

from belvedir.models import ApiKey
from belvedir.services import api_key_create
from harnesses.environments import environment_create, environment_harness_create
from harnesses.services import FIELDS, harness_delete, harness_update
from runs.models import Run, Status
from tests.helpers.harbor import FOUR_KINDS

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("owner_pays_as_you_go")]


@pytest.fixture
def environments(owner):
    """Three environments of the owner's project (judge and rubric tasks: any card takes them)."""
    return [
        environment_create(
            project=owner.project, created_by=owner.user, name=name, tasks=FOUR_KINDS[:2]
        )
        for name in ("Support desk", "Billing desk", "Secret desk")
    ]


def run_of(owner, harness) -> tuple[Run, str]:
    """A running run of `harness`, its snapshot taken as at launch; (run, its run key)."""
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        harness_snapshot={f: getattr(harness, f) for f in FIELDS},
        status=Status.RUNNING,
    )
    run.ingest_key, key = api_key_create(
        project=owner.project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.save(update_fields=["ingest_key"])
    return run, key


def export(client, key, environment_id) -> int:
    response = client.get(
        f"/api/v1/environments/{environment_id}/export?limit=1",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    if response.status_code == 200:  # that environment's export
        archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
        toml = next(name for name in archive.namelist() if name.endswith("/task.toml"))
        metadata = tomllib.loads(archive.read(toml).decode())["metadata"]
        assert metadata["environment"] == environment_id
    return response.status_code


def dataset_harness(environment):
    """A Runner-on-Harbor harness whose HARBOR_DATASET names the environment (its Tasks field
    cleared: a harness names its tasks one way)."""
    harness = environment_harness_create(environment=environment, preset="harbor-runner")
    env = {**harness.env, "HARBOR_DATASET": f"belvedir:{environment.pk}"}
    return harness_update(harness=harness, env=env, tasks="")


def test_a_run_key_exports_its_harbor_dataset_and_no_other_environment(owner, environments, client):
    mine, other, _ = environments
    harness = dataset_harness(mine)
    assert harness.env["HARBOR_DATASET"] == f"belvedir:{mine.pk}"
    _, key = run_of(owner, harness)
    assert export(client, key, mine.pk) == 200
    assert export(client, key, other.pk) == 404  # same project, not the run's
    assert export(client, key, "env_nope") == 404
    # The project's key and its members still export any of them.
    assert export(client, owner.key, other.pk) == 200
    assert owner.web.get(f"/api/v1/environments/{other.pk}/export").status_code == 200
    # And the run key still reaches nothing else of the API.
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    assert client.get("/api/v1/environments", **auth).status_code == 403
    assert client.get(f"/api/v1/environments/{mine.pk}", **auth).status_code == 403


def test_the_run_keeps_what_its_harness_named_at_launch(owner, environments, client):
    """HARBOR_DATASET edited after launch: the running run still exports what it was launched
    with (its snapshot), plus the environment its harness was made from; not the new one."""
    made_from, named, later = environments
    harness = environment_harness_create(environment=made_from, preset="harbor-runner")
    harness = harness_update(
        harness=harness, env={**harness.env, "HARBOR_DATASET": f"belvedir:{named.pk}"}, tasks=""
    )
    _, key = run_of(owner, harness)
    harness_update(harness=harness, env={**harness.env, "HARBOR_DATASET": f"belvedir:{later.pk}"})
    assert export(client, key, named.pk) == 200
    assert export(client, key, made_from.pk) == 200
    assert export(client, key, later.pk) == 404
    # A new run of the edited harness gets the new one.
    _, next_key = run_of(owner, harness)
    assert export(client, next_key, later.pk) == 200


def test_a_harness_made_from_an_environment_without_harbor_reaches_only_that_one(
    owner, environments, client
):
    mine, other, _ = environments
    harness = environment_harness_create(environment=mine, preset="runner")
    assert "HARBOR_DATASET" not in harness.env
    _, key = run_of(owner, harness)
    assert export(client, key, mine.pk) == 200
    assert export(client, key, other.pk) == 404


def test_a_run_naming_no_environment_exports_none(owner, environments, client):
    """A suite's registry dataset, `belvedir-sample`, a deleted harness without one in its
    snapshot, or a run key that belongs to no run: every environment is a 404."""
    suite = environment_harness_create(environment=environments[0], preset="harbor-runner")
    suite = harness_update(
        harness=suite, env={**suite.env, "HARBOR_DATASET": "belvedir-sample"}, tasks=""
    )
    run, key = run_of(owner, suite)
    assert export(client, key, environments[1].pk) == 404
    assert export(client, key, environments[0].pk) == 200  # the one it was made from
    harness_delete(harness=suite)
    run.refresh_from_db()
    assert run.harness is None
    assert export(client, key, environments[0].pk) == 404
    _, stray = api_key_create(project=owner.project, name="run r", kind=ApiKey.Kind.RUN)
    for environment in environments:
        assert export(client, stray, environment.pk) == 404


def test_a_deleted_harness_leaves_the_run_its_snapshots_dataset(owner, environments, client):
    mine, other, _ = environments
    harness = dataset_harness(mine)
    run, key = run_of(owner, harness)
    harness_delete(harness=harness)
    assert export(client, key, mine.pk) == 200
    assert export(client, key, other.pk) == 404


def test_a_run_key_of_another_project_gets_404_even_for_the_id_its_harness_names(
    owner, outsider, environments, client
):
    """The run's own project still bounds it: a harness naming another project's environment
    (by its id) exports nothing."""
    from harnesses.services import harness_create
    from tests.helpers.tenants import pay_as_you_go

    pay_as_you_go(outsider.org)
    harness = harness_create(
        project=outsider.project,
        created_by=outsider.user,
        preset="harbor-runner",
        name="theirs",
        env={"HARBOR_AGENT": "oracle", "HARBOR_DATASET": f"belvedir:{environments[0].pk}"},
        tasks="",
    )
    _, key = run_of(outsider, harness)
    assert export(client, key, environments[0].pk) == 404


def test_a_run_key_exports_its_runs_tasks_field_as_a_harbor_dataset(owner, environments, client):
    """What the Harbor driver runs for a Harbor harness with Tasks and no HARBOR_DATASET: the
    environments' export code on the run's Tasks (its snapshot), with the run's own key."""
    harness = environment_harness_create(environment=environments[0], preset="harbor-runner")
    assert "HARBOR_DATASET" not in harness.env
    run, key = run_of(owner, harness)
    harness_update(harness=harness, tasks='[{"id": "later", "prompt": "Edited"}]')
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    response = client.get(f"/api/v1/runs/{run.pk}/tasks/export", **auth)
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["X-Belvedir-Tasks-Total"] == "2"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    (root,) = {name.split("/")[0] for name in archive.namelist()}
    tasks = sorted({n.split("/")[1] for n in archive.namelist() if n.count("/") > 1})
    assert tasks == ["capital", "refund"]  # the snapshot's tasks, not the edit's
    config = tomllib.loads(archive.read(f"{root}/capital/task.toml").decode())
    assert config["metadata"]["run"] == run.pk
    assert "JUDGE_API_KEY" in config["verifier"]["env"]
    limited = client.get(f"/api/v1/runs/{run.pk}/tasks/export?limit=1", **auth)
    names = zipfile.ZipFile(io.BytesIO(b"".join(limited.streaming_content))).namelist()
    assert {n.split("/")[1] for n in names if n.count("/") > 1} == {"capital"}
    assert limited["X-Belvedir-Tasks-Total"] == "2"
    # Another run's key, the project's key: no.
    other, other_key = run_of(owner, harness)
    response = client.get(
        f"/api/v1/runs/{run.pk}/tasks/export", HTTP_AUTHORIZATION=f"Bearer {other_key}"
    )
    assert response.status_code == 404
    response = client.get(
        f"/api/v1/runs/{run.pk}/tasks/export", HTTP_AUTHORIZATION=f"Bearer {owner.key}"
    )
    assert response.status_code in (401, 403)
