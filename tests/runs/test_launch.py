"""Launching a run: the checks before anything runs, the caps, and the runs API's shape."""

import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from belvedir import crypto
from belvedir.errors import DomainError
from belvedir.models import ApiKey
from harnesses.services import harness_create
from runs import contract, services
from runs.models import Run
from tests.runs.helpers import git

RUN_FIELDS = {
    "id",
    "harness",
    "harness_name",
    "status",
    "queue_position",
    "waiting_for",
    "gpu_type",
    "gpu_device",
    "engine",
    "score",
    "score_stderr",
    "score_ci_low",
    "score_ci_high",
    "n_tasks",
    "score_interval_note",
    "results",
    "notes",
    "log_tail",
    "model",
    "fine_tuned_model",
    "model_base",
    "model_api_base",
    "has_model_api_key",
    "judge_model",
    "judge_api_base",
    "model_api_base_resolved",
    "judge_api_base_resolved",
    "covered",
    "covered_cap_micros",
    "covered_spent_micros",
    "model_proxied",
    "judge_proxied",
    "attempts",
    "grading",
    "exit_code",
    "created_at",
    "started_at",
    "finished_at",
    "stage",
    "stage_started_at",
    "traces_incomplete",
}


@pytest.fixture
def harness(make_harness):
    """The example harness in a local git repo (launch checks `git ls-remote` it)."""
    return make_harness()


def launch_with(owner, harness, **kwargs) -> Run:
    return services.run_launch(
        project=owner.project, harness=harness, created_by=owner.user, **kwargs
    )


# --- the repo must answer ---------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.parametrize(
    "repo_url, ref, reason",
    [
        ("file:///nonexistent", "", "does not appear to be a git repository"),
        ("https://nonexistent.invalid/x.git", "", "Could not resolve host: nonexistent.invalid"),
        (None, "no-such-branch", "has no branch or tag 'no-such-branch'"),
    ],
    ids=["missing-repo", "unknown-host", "missing-branch"],
)
def test_a_launch_is_refused_when_the_repo_does_not_answer(
    owner, make_harness, contract_repo, settings, repo_url, ref, reason
):
    settings.BELVEDIR_GIT_TIMEOUT = 5
    harness = make_harness(repo_url=repo_url or contract_repo, ref=ref)
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 400, response.content
    (message,) = response.json()["harness"]
    assert message.startswith(f"The repo {repo_url or contract_repo}")
    assert reason in message
    assert not Run.objects.exists()
    assert not ApiKey.objects.filter(kind=ApiKey.Kind.RUN).exists()


@pytest.mark.docker
def test_a_launch_is_refused_when_the_repo_does_not_answer_in_time(owner, make_harness, settings):
    settings.BELVEDIR_GIT_TIMEOUT = 1
    # A server on 127.0.0.1 that takes the connection and never answers.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        url = f"git://127.0.0.1:{server.getsockname()[1]}/harness.git"
        harness = make_harness(repo_url=url)
        started = time.monotonic()
        response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert time.monotonic() - started < 5
    assert response.status_code == 400
    assert response.json() == {"harness": [f"The repo {url} did not answer within 1 s."]}
    assert not Run.objects.exists()


@pytest.mark.docker
def test_a_commit_ref_is_not_looked_up_as_a_branch(owner, make_harness, contract_repo):
    sha = git(Path(contract_repo.removeprefix("file://")), "rev-parse", "HEAD")
    run = launch_with(owner, make_harness(ref=sha))
    assert run.status == "queued" and run.harness_snapshot["ref"] == sha


def test_a_gpu_harness_is_refused_where_there_are_no_gpu_workers(owner, make_harness, settings):
    settings.BELVEDIR_GPU_TYPES = {}
    harness = make_harness(compute="gpu")
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 400
    assert "no GPU workers" in response.json()["harness"][0]
    assert not Run.objects.exists()


def test_harness_env_cannot_set_contract_names(owner, contract_repo):
    for key in ("BELVEDIR_RUN_ID", "FRACTAL_API_KEY", "belvedir_base_url"):
        with pytest.raises(DomainError, match="harness contract sets itself"):
            harness_create(
                project=owner.project,
                name="x",
                repo_url=contract_repo,
                run_command="true",
                env={key: "1"},
            )


def test_contract_names_win_over_the_harness_env_even_if_one_got_in():
    env = contract.sandbox_env(
        harness_env={"BELVEDIR_RUN_ID": "forged", "FRACTAL_API_KEY": "forged", "MODEL": "h"},
        run_id="run_1",
        run_key="bv_live_k",
        base_url="http://platform",
        tasks="",
        attempts=1,
        grading="pass@1",
        model_settings={"MODEL": "launch", "MODEL_API_KEY": ""},
    )
    assert env["BELVEDIR_RUN_ID"] == "run_1" and env["FRACTAL_API_KEY"] == "bv_live_k"
    assert env["MODEL"] == "launch"
    assert "MODEL_API_KEY" not in env and "BELVEDIR_TASKS_FILE" not in env


# --- the caps ---------------------------------------------------------------------------------


@pytest.mark.docker
def test_a_fifth_run_in_flight_is_refused_with_a_clear_message(owner, harness):
    for _ in range(4):
        launch_with(owner, harness)
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 429
    assert response.json()["detail"] == (
        "Your organization already has 4 runs in flight (the limit is 4); "
        "wait for one to finish or cancel one."
    )
    assert Run.objects.count() == 4

    services.run_cancel(run=Run.objects.first())
    assert owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json").status_code == 201


@pytest.mark.docker
def test_runs_in_flight_in_another_organization_do_not_count(owner, outsider, harness, make_run):
    for _ in range(4):
        make_run(project=outsider.project, status="running")
    assert launch_with(owner, harness).status == "queued"


@pytest.mark.docker
def test_the_25th_run_in_24_hours_is_refused_and_older_runs_do_not_count(owner, harness, make_run):
    for _ in range(24):
        make_run(status="succeeded")
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 429
    assert (
        "launched 24 runs in the last 24 hours (the limit is 24; runs the platform failed"
        in response.json()["detail"]
    )
    assert Run.objects.count() == 24

    Run.objects.update(created_at=timezone.now() - timedelta(hours=24, minutes=1))
    assert owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json").status_code == 201


@pytest.mark.docker
def test_refused_launches_do_not_count_toward_the_caps(owner, harness, make_harness, settings):
    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = 1
    settings.BELVEDIR_RUNS_PER_DAY_CAP = 2
    broken = make_harness(name="broken", repo_url="file:///nonexistent")

    first = launch_with(owner, harness)
    for _ in range(3):  # refused: one in flight
        with pytest.raises(DomainError) as refused:
            launch_with(owner, harness)
        assert refused.value.code == "cap_in_flight"
    with pytest.raises(DomainError, match="cannot be read"):
        launch_with(owner, broken)
    with pytest.raises(DomainError, match="attempts"):
        launch_with(owner, harness, attempts=0)
    services.run_cancel(run=first)

    launch_with(owner, harness)  # the second of the day: the refusals did not count
    Run.objects.update(status="succeeded")
    with pytest.raises(DomainError) as refused:
        launch_with(owner, harness)
    assert refused.value.code == "cap_daily"
    assert Run.objects.count() == 2


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("which", ["in flight", "per day"])
def test_the_caps_hold_when_launches_race(owner, harness, settings, which):
    cap = 3
    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = cap if which == "in flight" else 100
    settings.BELVEDIR_RUNS_PER_DAY_CAP = cap if which == "per day" else 100
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    launched, refused, crashed = [], [], []

    def go():
        try:
            barrier.wait(timeout=30)
            launched.append(launch_with(owner, harness).pk)
        except DomainError as exc:
            refused.append(exc.code)
        except Exception as exc:  # noqa: BLE001 - reported below
            crashed.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(threads_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert crashed == []
    assert len(launched) == cap, (launched, refused)
    expected = "cap_in_flight" if which == "in flight" else "cap_daily"
    assert refused == [expected] * (threads_count - cap)
    assert Run.objects.count() == cap
    assert ApiKey.objects.filter(kind=ApiKey.Kind.RUN).count() == cap


# --- the API: launch --------------------------------------------------------------------------


@pytest.mark.docker
def test_launching_through_the_api_stores_the_settings_and_returns_the_run(owner, harness):
    response = owner.api.post(
        "/api/v1/runs",
        {
            "harness": harness.pk,
            "model": "acme/model-1",
            "model_api_base": "https://models.example/v1",
            "model_api_key": "sk-model-secret-1234",
            "judge_model": "acme/judge",
            "judge_api_base": "https://judge.example/v1",
            "judge_api_key": "sk-judge-secret-5678",
            "attempts": 3,
            "grading": "mean",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == RUN_FIELDS
    assert body["id"].startswith("run_") and body["harness"] == harness.pk
    assert body["status"] == "queued"
    assert body["score"] is None and body["results"] is None and body["notes"] == []
    assert body["started_at"] is None and body["finished_at"] is None
    assert body["model"] == "acme/model-1" and body["model_api_base"] == "https://models.example/v1"
    assert (
        body["judge_model"] == "acme/judge" and body["judge_api_base"] == "https://judge.example/v1"
    )
    assert body["attempts"] == 3 and body["grading"] == "mean"
    assert body["has_model_api_key"] is True
    assert "sk-model-secret-1234" not in response.content.decode()
    assert "sk-judge-secret-5678" not in response.content.decode()

    run = Run.objects.get(pk=body["id"])
    assert crypto.decrypt(run.model_api_key_encrypted) == "sk-model-secret-1234"
    assert crypto.decrypt(run.judge_api_key_encrypted) == "sk-judge-secret-5678"
    key = ApiKey.objects.get(ingest_run=run)
    assert key.kind == ApiKey.Kind.RUN and key.revoked_at is None
    assert run.harness_snapshot["repo_url"] == harness.repo_url


def test_a_read_only_member_cannot_launch(readonly, harness):
    response = readonly.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 403
    assert not Run.objects.exists()


def test_an_outsider_cannot_launch_another_organizations_harness(outsider, harness):
    response = outsider.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    # The same answer as for a harness that does not exist: nothing leaks.
    assert response.status_code == 400
    assert response.json() == {"harness": ["No such harness in this project."]}
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"attempts": 0}, "attempts"),
        ({"attempts": "many"}, "attempts"),
        ({"grading": "best"}, "grading"),
        ({"harness": "har_doesnotexist"}, "harness"),
        ({"harness": None}, "harness"),
        ({"model_api_base": "ftp://models.example"}, "model_api_base"),
        ({"judge_api_base": "judge.example"}, "judge_api_base"),
    ],
)
def test_bad_launch_input_is_refused_naming_the_field(owner, harness, body, field):
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk, **body}, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert not Run.objects.exists()


# --- the API: read, list, log, cancel ---------------------------------------------------------


@pytest.mark.docker
def test_a_run_reads_back_without_secrets(owner, harness):
    run = launch_with(
        owner, harness, model_api_key="sk-model-secret-1234", judge_api_key="sk-j-99999"
    )
    response = owner.api.get(f"/api/v1/runs/{run.pk}")
    assert response.status_code == 200
    assert set(response.json()) == RUN_FIELDS
    text = response.content.decode()
    assert "sk-model-secret-1234" not in text and "sk-j-99999" not in text
    assert crypto.decrypt(run.run_key_encrypted) not in text
    assert "encrypted" not in text


def test_a_run_is_readable_by_members_and_hidden_from_outsiders(
    owner, readonly, outsider, make_run
):
    run = make_run(status="succeeded", score=0.5)
    assert owner.api.get(f"/api/v1/runs/{run.pk}").json()["score"] == 0.5
    assert readonly.api.get(f"/api/v1/runs/{run.pk}").status_code == 200
    assert outsider.api.get(f"/api/v1/runs/{run.pk}").status_code == 404
    assert owner.api.get("/api/v1/runs/run_doesnotexist").status_code == 404


def test_the_run_list_filters_and_paginates(owner, readonly, outsider, make_harness, make_run):
    a, b = make_harness(name="a"), make_harness(name="b")
    make_run(harness=a, status="succeeded", model="m1")
    make_run(harness=a, status="failed", model="m2")
    make_run(harness=b, status="succeeded", model="m1")
    make_run(project=outsider.project, status="succeeded", model="m1")

    def ids(client, **params):
        response = client.api.get("/api/v1/runs", params)
        assert response.status_code == 200
        return response.json()

    assert ids(owner)["count"] == 3
    assert ids(readonly)["count"] == 3
    assert ids(outsider)["count"] == 1  # only its own
    assert {r["harness"] for r in ids(owner, harness=a.pk)["results"]} == {a.pk}
    assert ids(owner, harness=a.pk)["count"] == 2
    assert [r["status"] for r in ids(owner, status="failed")["results"]] == ["failed"]
    assert ids(owner, model="m1")["count"] == 2
    assert ids(owner, harness=a.pk, status="succeeded", model="m1")["count"] == 1
    page = ids(owner, limit=2)
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert len(ids(owner, limit=2, offset=2)["results"]) == 1
    assert set(ids(owner)["results"][0]) == RUN_FIELDS


def test_the_log_endpoint_is_scoped_and_checks_its_offset(owner, readonly, outsider, make_run):
    run = make_run(status="running", log_tail="hello\nworld\n", log_size=12)
    assert owner.api.get(f"/api/v1/runs/{run.pk}/log").json() == {
        "text": "hello\nworld\n",
        "offset": 12,
        "status": "running",
        "truncated": False,
    }
    assert owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 6}).json()["text"] == "world\n"
    assert owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 12}).json()["text"] == ""
    assert readonly.api.get(f"/api/v1/runs/{run.pk}/log").status_code == 200
    assert outsider.api.get(f"/api/v1/runs/{run.pk}/log").status_code == 404
    bad = owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": "abc"})
    assert bad.status_code == 400 and list(bad.json()) == ["offset"]


def test_the_log_endpoint_says_when_the_tail_no_longer_holds_the_offset(owner, make_run):
    run = make_run(status="running", log_tail="the last part\n", log_size=50_000)
    body = owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 10}).json()
    assert body == {
        "text": "the last part\n",
        "offset": 50_000,
        "status": "running",
        "truncated": True,
    }


@pytest.mark.docker
def test_cancelling_through_the_api_is_for_writers_in_the_organization(
    owner, readonly, outsider, harness
):
    run = launch_with(owner, harness)
    assert readonly.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 403
    assert outsider.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 404
    run.refresh_from_db()
    assert run.status == "queued"

    response = owner.api.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["notes"] == ["belvedir: cancelled by request."]


def test_cancelling_a_finished_run_is_refused(owner, make_run):
    run = make_run(status="succeeded", score=0.9, finished_at=timezone.now())
    response = owner.api.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 400
    assert response.json() == {"status": ["The run has already succeeded."]}
    run.refresh_from_db()
    assert run.status == "succeeded"


@pytest.mark.docker
def test_the_tasks_file_is_only_for_the_runs_own_key(owner, make_harness):
    one = launch_with(owner, make_harness(name="one", tasks="t1\n"))
    two = launch_with(owner, make_harness(name="two", tasks="t2\n"))
    sandbox = APIClient()
    sandbox.credentials(HTTP_AUTHORIZATION=f"Bearer {crypto.decrypt(one.run_key_encrypted)}")
    assert sandbox.get(f"/api/v1/runs/{one.pk}/tasks").content == b"t1\n"
    assert sandbox.get(f"/api/v1/runs/{two.pk}/tasks").status_code == 404
    # The run key is for the sandbox only: it cannot use the REST API.
    assert sandbox.get(f"/api/v1/runs/{one.pk}").status_code == 403
    # A project key cannot fetch Tasks files.
    assert owner.api.get(f"/api/v1/runs/{one.pk}/tasks").status_code == 403
