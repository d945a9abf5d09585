"""Run benchmark against a fine-tuned model: the launch checks, what the sandbox is given, the
signed adapter URL, the model's runs (API, My Benchmarks filter)."""

import time

import pytest
from django.test import Client
from django.utils import timezone

from models_registry.services import hf_token_set
from models_registry.signing import AdapterGrant, adapter_token
from runs import contract, services
from runs.models import Run, Status
from tests.helpers.adapters import adapter_zip_bytes

pytestmark = pytest.mark.django_db

HF = "hf_" + "a1B2c3D4e5" * 3


@pytest.fixture(autouse=True)
def _gpu(gpu_settings):
    """One simulated A10G: GPU harnesses of that type launch."""


@pytest.fixture
def gpu_harness(make_harness):
    return make_harness(name="vllm-eval", compute="gpu", gpu_type="A10G")


def launch_via_api(owner, model, harness, **body):
    return owner.api.post(
        f"/api/v1/models/{model.pk}/runs", {"harness": harness.pk, **body}, format="json"
    )


def started(run: Run) -> Run:
    """The run as a worker has it once claimed."""
    Run.objects.filter(pk=run.pk).update(status=Status.RUNNING, started_at=timezone.now())
    run.refresh_from_db()
    return run


def test_run_benchmark_on_a_cpu_harness_is_refused(owner, make_fine_tuned, make_harness):
    model = make_fine_tuned()
    cpu = make_harness(name="cpu-eval")
    response = launch_via_api(owner, model, cpu)
    assert response.status_code == 400
    assert (
        "fine-tuned models need a GPU harness that serves the model in the sandbox"
        in response.json()["harness"][0]
    )
    assert not Run.objects.exists()


@pytest.mark.docker
def test_a_gated_base_needs_the_organizations_hugging_face_token(
    owner, make_fine_tuned, gpu_harness, django_capture_on_commit_callbacks
):
    model = make_fine_tuned(gated=True)
    refused = launch_via_api(owner, model, gpu_harness)
    assert refused.status_code == 400
    assert "Hugging Face token" in refused.json()["model"][0]
    hf_token_set(organization=owner.org, token=HF)
    with django_capture_on_commit_callbacks(execute=False):
        assert launch_via_api(owner, model, gpu_harness).status_code == 201


@pytest.mark.docker
def test_the_run_records_the_models_name_and_gives_the_sandbox_base_adapter_and_label(
    owner, make_fine_tuned, gpu_harness, settings, django_capture_on_commit_callbacks
):
    hf_token_set(organization=owner.org, token=HF)
    model = make_fine_tuned(gated=True)
    with django_capture_on_commit_callbacks(execute=False):
        response = launch_via_api(owner, model, gpu_harness, attempts=3, grading="pass@k")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["model"] == "llama-lora-v1" and body["model_base"] == "meta-llama/Llama-3.1-8B"
    assert body["fine_tuned_model"] == model.pk
    assert body["attempts"] == 3 and body["grading"] == "pass@k"
    run = started(Run.objects.get(pk=body["id"]))

    env = contract.run_fine_tuned_env(run, base_url="http://172.30.0.1:18700")
    assert env["MODEL"] == "meta-llama/Llama-3.1-8B"
    assert env["MODEL_LABEL"] == "llama-lora-v1"
    assert env["HF_TOKEN"] == HF
    assert env["ADAPTER_URL"].startswith(f"http://172.30.0.1:18700/api/v1/adapters/{run.pk}/")
    # Contract names win over the harness's own env.
    sandbox = contract.sandbox_env(
        harness_env={"MODEL": "harness-model", "ADAPTER_URL": "x"},
        run_id=run.pk,
        run_key="k" * 10,
        base_url="http://172.30.0.1:18700",
        tasks="",
        attempts=1,
        grading="pass@1",
        model_settings={"MODEL": run.model_base},
        fine_tuned=env,
    )
    assert sandbox["MODEL"] == env["MODEL"] and sandbox["ADAPTER_URL"] == env["ADAPTER_URL"]
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert "fine-tuned on" in page and f'href="/models/{model.pk}/"' in page
    # The page's harness contract names them, with none of their values.
    real = contract.run_sandbox_env(run, secrets=contract.run_model_secrets(run))
    assert contract.run_sandbox_env_names(run) == sorted(real)
    assert "<li>HF_TOKEN</li>" in page and "<li>ADAPTER_URL</li>" in page
    assert HF not in page and env["ADAPTER_URL"] not in page
    secrets = contract.run_secret_values(run)
    assert HF in secrets
    assert env["ADAPTER_URL"].rsplit("/", 1)[1] in secrets


@pytest.mark.docker
def test_the_adapter_url_works_without_a_login_for_that_run_only_while_it_runs(
    owner, make_fine_tuned, gpu_harness, django_capture_on_commit_callbacks
):
    model = make_fine_tuned()
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_launch_fine_tuned(fine_tuned_model=model, harness=gpu_harness)
        other = services.run_launch_fine_tuned(fine_tuned_model=model, harness=gpu_harness)
    run, other = started(run), started(other)
    url = contract.run_fine_tuned_env(run, base_url="")["ADAPTER_URL"]
    token = url.rsplit("/", 1)[1]
    anonymous = Client()

    response = anonymous.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert b"".join(response.streaming_content) == adapter_zip_bytes()

    assert anonymous.get(f"/api/v1/adapters/{other.pk}/{token}").status_code == 403
    assert anonymous.get(url[:-2] + "xx").status_code == 403
    expired = adapter_token(
        AdapterGrant(run_id=run.pk, model_id=model.pk, expires=int(time.time()) - 1)
    )
    assert anonymous.get(f"/api/v1/adapters/{run.pk}/{expired}").status_code == 403
    Run.objects.filter(pk=run.pk).update(status=Status.SUCCEEDED, finished_at=timezone.now())
    after = anonymous.get(url)
    assert after.status_code == 403 and "succeeded" in after.json()["detail"]


def test_the_models_runs_are_those_launched_against_it_or_reporting_its_name(
    owner, outsider, make_fine_tuned, make_run
):
    model = make_fine_tuned()
    launched = make_run(fine_tuned_model=model, model=model.name, score=0.5)
    reported = make_run(model="", results={"model": "llama-lora-v1", "score": 0.7}, score=0.7)
    make_run(model="someone-else", results={"model": "someone-else"})
    listed = owner.api.get(f"/api/v1/models/{model.pk}/benchmarks").json()
    assert {r["id"] for r in listed["results"]} == {launched.pk, reported.pk}
    assert listed["count"] == 2
    assert outsider.api.get(f"/api/v1/models/{model.pk}/benchmarks").status_code == 404

    runs = owner.api.get("/api/v1/runs", {"model": model.pk}).json()["results"]
    assert {r["id"] for r in runs} == {launched.pk, reported.pk}
    page = owner.web.get("/runs/", {"model": model.pk}).content.decode()
    assert launched.pk in page and reported.pk in page


@pytest.mark.docker
def test_a_run_whose_model_was_deleted_cannot_run_again(
    owner, make_fine_tuned, gpu_harness, django_capture_on_commit_callbacks
):
    model = make_fine_tuned()
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_launch_fine_tuned(fine_tuned_model=model, harness=gpu_harness)
    owner.api.delete(f"/api/v1/models/{model.pk}")
    run.refresh_from_db()
    assert run.fine_tuned_model is None and run.model_base == "meta-llama/Llama-3.1-8B"
    response = owner.web.post(f"/runs/{run.pk}/again/")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"harness": "har_nope"}, "harness"),
        ({"attempts": 0}, "attempts"),
        ({"grading": "best"}, "grading"),
    ],
    ids=["unknown harness", "attempts 0", "unknown grading"],
)
def test_run_benchmark_names_the_bad_field(owner, make_fine_tuned, gpu_harness, body, field):
    model = make_fine_tuned()
    response = owner.api.post(
        f"/api/v1/models/{model.pk}/runs", {"harness": gpu_harness.pk, **body}, format="json"
    )
    assert response.status_code == 400 and field in response.json()
    assert not Run.objects.exists()


def test_run_benchmark_is_404_for_outsiders_and_403_for_read_only_members(
    owner, outsider, readonly, make_fine_tuned, gpu_harness
):
    model = make_fine_tuned()
    body = {"harness": gpu_harness.pk}
    assert outsider.api.post(f"/api/v1/models/{model.pk}/runs", body).status_code == 404
    assert readonly.api.post(f"/api/v1/models/{model.pk}/runs", body).status_code == 403
    assert outsider.web.get(f"/runs/model/{model.pk}/new/").status_code == 404
    assert not Run.objects.exists()


def test_the_hugging_face_token_moves_to_a_new_key_with_reencrypt_fields(owner, settings):
    from django.core.management import call_command

    from models_registry.selectors import hf_token_value

    hf_token_set(organization=owner.org, token=HF)
    settings.FIELD_ENCRYPTION_KEYS = ["a-new-key-for-this-test", *settings.FIELD_ENCRYPTION_KEYS]
    call_command("reencrypt_fields", verbosity=0)
    settings.FIELD_ENCRYPTION_KEYS = settings.FIELD_ENCRYPTION_KEYS[:1]
    assert hf_token_value(organization=owner.org) == HF
