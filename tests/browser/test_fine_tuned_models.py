"""A fine-tuned model end to end: uploaded through the API (the CLI's streamed multipart),
benchmarked on a GPU harness (a simulated A10G worker, BELVEDIR_GPU_SIMULATE=1) whose sandbox
downloads ADAPTER_URL through the sandbox gateway with no credentials; the run is the model's
in the API and in the View benchmarks panel, and no secret leaks anywhere."""

import os
import re
import textwrap
import urllib.error
import urllib.request

import pytest
from django.db import connection
from django.test import Client
from playwright.sync_api import expect

from models_registry.models import FineTunedModel
from models_registry.services import hf_token_set
from runs.models import Run
from tests.helpers.adapters import write_adapter_zip
from tests.runs.helpers import git_repo_of, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.django_db(transaction=True)]

HF = "hf_" + "Qw3rTy7uIo" * 3 + "p1"
NAME = "llama-support-lora-v2"
BASE = "meta-llama/Llama-3.1-8B-Instruct"

# The harness: fetch the adapter as a vLLM harness would (no credentials, plain urllib),
# check the zip, try the same link for another run, report what it was given.
RUN_PY = textwrap.dedent(
    """
    import io, json, os, urllib.error, urllib.request, zipfile

    url = os.environ["ADAPTER_URL"]
    print("MODEL=" + os.environ.get("MODEL", ""))
    print("MODEL_LABEL=" + os.environ.get("MODEL_LABEL", ""))
    print("HF_TOKEN present: " + ("yes" if os.environ.get("HF_TOKEN") else "no"))
    print("HF_TOKEN=" + os.environ.get("HF_TOKEN", ""))
    print("ADAPTER_URL=" + url)
    data = urllib.request.urlopen(urllib.request.Request(url), timeout=60).read()
    names = sorted(zipfile.ZipFile(io.BytesIO(data)).namelist())
    print("adapter", len(data), "bytes:", " ".join(names))
    assert "adapter_config.json" in names, names
    base, run_id, token = url.rsplit("/", 2)
    try:
        urllib.request.urlopen(base + "/run_0000000000someoneelse/" + token, timeout=60)
        print("another run's id: allowed")
    except urllib.error.HTTPError as exc:
        print("another run's id: HTTP", exc.code)
    results = {"score": 0.75, "model": os.environ["MODEL_LABEL"], "adapter_bytes": len(data),
               "members": names, "hf": os.environ.get("HF_TOKEN", ""), "link": url,
               # reversed, so the test can try the very link once the run is over
               "knil": url[::-1]}
    json.dump(results, open("results.json", "w"))
    """
)


@pytest.fixture
def adapter_harness(tmp_path, owner):
    from harnesses.services import harness_create

    source = tmp_path / "lora-harness"
    source.mkdir()
    (source / "run.py").write_text(RUN_PY)
    return harness_create(
        project=owner.project,
        created_by=owner.user,
        name="vllm lora eval",
        repo_url=git_repo_of(source, tmp_path / "lora-harness-repo"),
        run_command="python3 run.py",
        compute="gpu",
        gpu_type="A10G",
    )


def test_a_fine_tuned_model_is_uploaded_benchmarked_on_a_gpu_harness_and_shown_in_its_panel(
    gpu_settings,
    sandbox_settings,
    media_root,
    gpu_cluster,
    cli,
    owner,
    adapter_harness,
    signed_in_page,
    tmp_path,
):
    hf_token_set(organization=owner.org, token=HF)
    zip_path = write_adapter_zip(tmp_path / "adapter.zip")
    code, out, err = cli(
        "models", "upload", "--name", NAME, "--base", BASE, "--gated", str(zip_path)
    )
    assert code == 0, err
    model = FineTunedModel.objects.get(name=NAME)

    code, out, err = cli("models", "run", model.pk, "--harness", adapter_harness.pk)
    assert code == 0, err
    run_id = re.search(r"launched (run_\w+)", out).group(1)
    run = wait_for(
        lambda: (r := Run.objects.get(pk=run_id)).is_terminal and r,
        180,
        "the fine-tuned model's run to finish",
        every=0.5,
        on_timeout=lambda: gpu_cluster.read_text()[-3000:],
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == pytest.approx(0.75)
    assert run.fine_tuned_model_id == model.pk and run.gpu_device
    # What the sandbox was given, and what it did with it.
    log = run.log_tail
    assert f"MODEL={BASE}" in log and f"MODEL_LABEL={NAME}" in log
    assert "HF_TOKEN present: yes" in log and "HF_TOKEN=[redacted]" in log
    assert "adapter_config.json adapter_model.safetensors" in log
    assert "another run's id: HTTP 403" in log
    assert run.results["model"] == NAME
    assert run.results["members"] == ["adapter_config.json", "adapter_model.safetensors"]
    assert run.results["hf"] == "[redacted]" and run.results["link"].endswith("/[redacted]")

    # The very link the sandbox used, now the run is over: refused, through the gateway and
    # directly; with another (running) run's id too.
    link = run.results["knil"][::-1]
    assert link.startswith(
        f"{sandbox_settings.BELVEDIR_SANDBOX_BASE_URL}/api/v1/adapters/{run_id}/"
    )
    token = link.rsplit("/", 1)[1]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(link, timeout=30)
    assert refused.value.code == 403
    path = link.removeprefix(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    assert "the run has ended (succeeded)" in Client().get(path).json()["detail"]
    other = Run.objects.create(project=owner.project, harness_name="x", status="running")
    assert Client().get(f"/api/v1/adapters/{other.pk}/{token}").status_code == 403

    # The API lists the run as the model's, with its score; no secret anywhere.
    listed = owner.api.get(f"/api/v1/models/{model.pk}/benchmarks").json()
    assert [(r["id"], r["score"]) for r in listed["results"]] == [(run_id, 0.75)]
    bodies = [
        owner.api.get(f"/api/v1/models/{model.pk}/benchmarks").content,
        owner.api.get(f"/api/v1/runs/{run_id}").content,
        owner.api.get(f"/api/v1/runs/{run_id}/log", {"offset": 0}).content,
        owner.api.get(f"/api/v1/models/{model.pk}").content,
        owner.web.get(f"/runs/{run_id}/").content,
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT r::text FROM runs_run r WHERE id = %s", [run_id])
        bodies.append(cursor.fetchone()[0].encode())
        cursor.execute("SELECT t::text FROM models_registry_huggingfacetoken t")
        bodies.append(cursor.fetchone()[0].encode())
    for body in bodies:
        assert HF.encode() not in body and token.encode() not in body
    for note in run.notes:
        assert HF not in note and token not in note
    worker_log = gpu_cluster.read_text()  # the worker cluster's (and its gateway's) log
    assert HF not in worker_log and token not in worker_log

    # The Models page: the latest score in the list, the run in the View benchmarks panel.
    page = signed_in_page
    page.goto("/models/")
    expect(page.locator(f"#latest-scores-{model.pk}")).to_contain_text("vllm lora eval: 0.750")
    page.click(f"text={NAME}")
    panel = page.locator("#model-benchmarks")
    row = panel.locator(f"tr[data-run={run_id}]")
    expect(row).to_contain_text("vllm lora eval")
    expect(row.locator(".score")).to_have_text("0.750")
    expect(row).to_contain_text("pass@1")
    expect(panel.locator("canvas[data-score-chart]")).to_be_visible()
    page.click("text=All runs of this model in My Benchmarks")
    expect(page.locator("#run-table")).to_contain_text(run_id)


def test_uploading_on_the_models_page_shows_its_progress_and_opens_the_model(
    signed_in_page, media_root, tmp_path
):
    page = signed_in_page
    weights = os.urandom(3 * 2**20)  # incompressible: the upload takes a few progress events
    zip_path = write_adapter_zip(
        tmp_path / "big.zip",
        {"adapter_config.json": b'{"peft_type": "LORA"}', "adapter_model.safetensors": weights},
    )
    seen: list[str] = []
    page.on("console", lambda message: seen.append(message.text))
    page.goto("/models/")
    # Report the bar as the page's own script moves it (it listens first, so this reads after).
    page.evaluate(
        """document.addEventListener("htmx:xhr:progress", () => {
             const bar = document.getElementById("upload-progress");
             console.log("bar " + bar.value + " hidden=" + bar.hidden);
           });"""
    )
    page.fill("#upload_name", "browser-lora")
    page.fill("#upload_base_model", "Qwen/Qwen2.5-7B-Instruct")
    page.set_input_files("#upload_adapter", str(zip_path))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/models/ftm_[a-z0-9]+/$"))
    expect(page.locator("h1")).to_have_text("browser-lora")
    assert "bar 100 hidden=false" in seen, seen
    model = FineTunedModel.objects.get(name="browser-lora")
    assert model.adapter_size == zip_path.stat().st_size
    assert model.adapter.read() == zip_path.read_bytes()


def test_a_bad_zip_on_the_models_page_is_named_under_the_file_field(
    signed_in_page, media_root, tmp_path
):
    page = signed_in_page
    bad = write_adapter_zip(tmp_path / "bad.zip", {"adapter_model.bin": b"weights"})
    page.goto("/models/")
    page.fill("#upload_name", "bad-lora")
    page.fill("#upload_base_model", "Qwen/Qwen2.5-7B-Instruct")
    page.set_input_files("#upload_adapter", str(bad))
    page.click("#upload-form button[type=submit]")
    expect(page.locator('#upload-form ul[data-field="adapter"]')).to_contain_text(
        "no adapter_config.json"
    )
    assert not FineTunedModel.objects.exists()
