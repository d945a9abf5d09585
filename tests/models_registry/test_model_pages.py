"""The Models page (list, upload, detail, delete), the runs partials it pulls in (latest
scores, View benchmarks, Run benchmark) and the Hugging Face token in Organization settings."""

import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from belvedir.models import AuditEvent
from models_registry.models import FineTunedModel, HuggingFaceToken
from runs.models import Run
from tests.helpers.adapters import adapter_zip_bytes

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
HF = "hf_" + "Zz9Yy8Xx7W" * 3


def zip_file(data=None):
    return SimpleUploadedFile("adapter.zip", adapter_zip_bytes() if data is None else data)


def scored_run(owner, model, harness_name="vllm-eval", score=0.8, **fields):
    return Run.objects.create(
        project=owner.project,
        harness_name=harness_name,
        fine_tuned_model=model,
        model=model.name,
        status="succeeded",
        score=score,
        finished_at=timezone.now(),
        **fields,
    )


def test_the_list_shows_models_and_pulls_their_latest_scores_in(owner, make_fine_tuned):
    model = make_fine_tuned()
    page = owner.web.get("/models/").content.decode()
    assert "llama-lora-v1" in page and "meta-llama/Llama-3.1-8B" in page
    assert f"fragment=model-scores&amp;model={model.pk}" in page
    scored_run(owner, model, score=0.25)
    scored_run(owner, model, score=0.75)  # the latest of vllm-eval
    scored_run(owner, model, harness_name="other-eval", score=0.5)
    cells = owner.web.get(
        "/runs/", {"fragment": "model-scores", "model": model.pk}, **HTMX
    ).content.decode()
    assert f'id="latest-scores-{model.pk}" hx-swap-oob="true"' in cells
    assert "vllm-eval: " in cells and "0.750" in cells and "0.250" not in cells
    assert "other-eval: " in cells and "0.500" in cells


def test_uploading_in_the_browser_stores_the_model_and_opens_it(owner):
    response = owner.web.post(
        "/models/upload/",
        {"name": "web-lora", "base_model": "Qwen/Qwen2.5-7B", "adapter": zip_file()},
        **HTMX,
    )
    model = FineTunedModel.objects.get(name="web-lora")
    assert response.status_code == 200 and response["HX-Redirect"] == f"/models/{model.pk}/"
    assert model.adapter.read() == adapter_zip_bytes()


def test_a_bad_zip_uploaded_in_the_browser_is_named_in_the_form(owner):
    response = owner.web.post(
        "/models/upload/",
        {"name": "web-lora", "base_model": "Qwen/Qwen2.5-7B", "adapter": zip_file(b"nope")},
        **HTMX,
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-field="adapter"' in body and "not a zip file" in body
    assert not FineTunedModel.objects.exists()


def test_the_upload_form_has_a_progress_bar(owner):
    page = owner.web.get("/models/").content.decode()
    assert 'hx-encoding="multipart/form-data"' in page and "<progress" in page
    assert "model_upload.js" in page


def test_the_detail_pulls_in_the_panel_and_the_run_form(owner, make_fine_tuned):
    model = make_fine_tuned()
    page = owner.web.get(f"/models/{model.pk}/").content.decode()
    assert f"fragment=model-benchmarks&amp;model={model.pk}" in page
    assert f'href="/runs/?model={model.pk}"' in page  # the fallback without scripts
    assert f"/runs/model/{model.pk}/new/" in page


def test_the_view_benchmarks_panel_lists_the_runs_with_a_chart(owner, make_fine_tuned):
    model = make_fine_tuned()
    run = scored_run(owner, model, score=0.9, attempts=3, grading="pass@k")
    panel = owner.web.get(
        "/runs/", {"fragment": "model-benchmarks", "model": model.pk}, **HTMX
    ).content.decode()
    assert 'id="model-benchmarks"' in panel and run.pk in panel
    assert "0.900" in panel and "pass@k" in panel and "vllm-eval" in panel
    assert 'data-score-chart="model-chart-data"' in panel


def test_run_benchmark_offers_only_gpu_harnesses_and_refuses_a_cpu_one(
    owner, make_fine_tuned, make_harness
):
    model = make_fine_tuned()
    cpu = make_harness(name="cpu-eval")
    form = owner.web.get(f"/runs/model/{model.pk}/new/", **HTMX).content.decode()
    assert "no GPU harness" in form
    gpu = make_harness(name="gpu-eval", compute="gpu", gpu_type="A10G")
    form = owner.web.get(f"/runs/model/{model.pk}/new/", **HTMX).content.decode()
    assert gpu.name in form and cpu.name not in form
    refused = owner.web.post(
        f"/runs/model/{model.pk}/new/",
        {"harness": cpu.pk, "attempts": 1, "grading": "pass@1"},
        **HTMX,
    )
    assert refused.status_code == 400
    assert "fine-tuned models need a GPU harness" in refused.content.decode()


def test_deleting_in_the_browser_removes_the_model_and_its_file(
    owner, make_fine_tuned, django_capture_on_commit_callbacks
):
    model = make_fine_tuned()
    path = model.adapter.path
    with django_capture_on_commit_callbacks(execute=True):
        response = owner.web.post(f"/models/{model.pk}/delete/")
    assert response.status_code == 303
    assert not FineTunedModel.objects.exists()
    assert not os.path.exists(path)


def test_outsiders_get_404_and_read_only_members_403(owner, outsider, readonly, make_fine_tuned):
    model = make_fine_tuned()
    assert outsider.web.get(f"/models/{model.pk}/").status_code == 404
    assert (
        outsider.web.get(
            "/runs/", {"fragment": "model-benchmarks", "model": model.pk}, **HTMX
        ).status_code
        == 404
    )
    assert readonly.web.get(f"/models/{model.pk}/").status_code == 200
    assert readonly.web.post(f"/models/{model.pk}/delete/").status_code == 403
    upload = readonly.web.post(
        "/models/upload/", {"name": "x", "base_model": "a/b", "adapter": zip_file()}
    )
    assert upload.status_code == 403


def test_the_hugging_face_token_is_set_in_organization_settings_and_never_shown(owner, member):
    settings_page = owner.web.get("/settings/organization/").content.decode()
    assert 'hx-get="/models/hugging-face-token/"' in settings_page
    response = owner.web.post("/models/hugging-face-token/", {"token": HF}, **HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "A token is set" in body and HF not in body
    stored = HuggingFaceToken.objects.get(organization=owner.org)
    assert HF not in stored.token_encrypted
    assert HF not in owner.web.get("/models/hugging-face-token/", **HTMX).content.decode()
    bad = owner.web.post("/models/hugging-face-token/", {"token": "not-a-token"}, **HTMX)
    assert bad.status_code == 400 and "hf_" in bad.content.decode()
    assert member.web.post("/models/hugging-face-token/", {"token": HF}).status_code == 403
    owner.web.post("/models/hugging-face-token/", {"action": "remove"}, **HTMX)
    assert not HuggingFaceToken.objects.exists()
    events = AuditEvent.objects.filter(action="hf_token.change", organization=owner.org)
    assert [e.metadata for e in events.order_by("pk")] == [{"token": "set"}, {"token": "removed"}]
    assert all(e.actor_user == owner.user for e in events)
    assert HF not in owner.web.get("/settings/organization/audit/").content.decode()
