"""examples/vllm-harness: serves MODEL with vLLM and the adapter from ADAPTER_URL
(--enable-lora --lora-modules MODEL_LABEL=…), asks its tasks of the adapter and writes
results.json with model = MODEL_LABEL. vLLM needs a GPU, so tests/helpers/fake_vllm.py takes
its place: the adapter's name answers right, the base model wrong. Run by hand, then as a
fine-tuned model's run on the simulated A10G worker, the adapter fetched through the gateway."""

import contextlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runs.models import Run
from tests.helpers.adapters import adapter_zip_bytes
from tests.runs.helpers import EXAMPLES, git_repo_of, wait_for

FAKE_VLLM = Path(__file__).parents[1] / "helpers" / "fake_vllm.py"


def harness_copy(tmp_path: Path) -> Path:
    """The example with the fake vLLM beside it (executable, as `vllm` would be)."""
    repo = tmp_path / "vllm-harness"
    shutil.copytree(EXAMPLES / "vllm-harness", repo)
    shutil.copy(FAKE_VLLM, repo / "fake_vllm.py")
    (repo / "fake_vllm.py").chmod(0o755)
    return repo


@contextlib.contextmanager
def serving(body: bytes):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/adapter.zip"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_harness(repo: Path, **env) -> subprocess.CompletedProcess:
    environment = {
        "PATH": os.environ["PATH"],
        "MODEL": "meta-llama/Llama-3.1-8B",
        "VLLM_BIN": "./fake_vllm.py",
        "VLLM_PORT": str(free_port()),
        "VLLM_START_TIMEOUT": "30",
        **env,
    }
    return subprocess.run(
        [sys.executable, "run.py"], cwd=repo, env=environment, capture_output=True, text=True
    )


def test_it_serves_the_adapter_under_its_label_and_scores_the_adapter(tmp_path):
    repo = harness_copy(tmp_path)
    with serving(adapter_zip_bytes()) as url:
        done = run_harness(repo, ADAPTER_URL=url, MODEL_LABEL="llama-lora-v1")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((repo / "results.json").read_text())
    assert results["model"] == "llama-lora-v1" and results["adapter"] is True
    assert results["base_model"] == "meta-llama/Llama-3.1-8B"
    assert results["score"] == 1.0 and len(results["tasks"]) == 5  # asked of the adapter
    argv = json.loads((repo / "fake-vllm.json").read_text())["argv"]
    assert argv[:2] == ["serve", "meta-llama/Llama-3.1-8B"]
    assert "--enable-lora" in argv
    module = argv[argv.index("--lora-modules") + 1]
    assert module.startswith("llama-lora-v1=") and module.endswith("/adapter/unpacked")
    assert argv[argv.index("--max-lora-rank") + 1] == "8"  # the adapter's r


def test_without_an_adapter_it_serves_and_scores_the_base_model(tmp_path):
    repo = harness_copy(tmp_path)
    done = run_harness(repo, BELVEDIR_TASK_ATTEMPTS="2", BELVEDIR_GRADING="mean")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((repo / "results.json").read_text())
    assert results["model"] == "meta-llama/Llama-3.1-8B" and results["adapter"] is False
    assert results["score"] == 0.0 and results["tasks"]["add"]["attempts"] == [0.0, 0.0]
    assert "--enable-lora" not in json.loads((repo / "fake-vllm.json").read_text())["argv"]


def test_a_tasks_field_replaces_its_own_tasks_and_a_task_without_an_answer_is_errored(tmp_path):
    repo = harness_copy(tmp_path)
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps(
            [
                {
                    "id": "add",
                    "prompt": "What is 17 + 25? Answer with the number only.",
                    "answer": "42",
                },
                {"id": "open", "prompt": "Say something."},
            ]
        )
    )
    with serving(adapter_zip_bytes()) as url:
        done = run_harness(repo, ADAPTER_URL=url, MODEL_LABEL="m", BELVEDIR_TASKS_FILE=str(tasks))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((repo / "results.json").read_text())
    assert list(results["tasks"]) == ["add"] and results["score"] == 1.0
    assert "no recorded answer" in results["errored"]["open"]


def test_an_adapter_zip_without_its_config_fails_the_run_saying_so(tmp_path):
    repo = harness_copy(tmp_path)
    with serving(adapter_zip_bytes({"weights.bin": b"x"})) as url:
        done = run_harness(repo, ADAPTER_URL=url, MODEL_LABEL="m")
    assert done.returncode == 1
    assert "the adapter zip holds no adapter_config.json" in done.stdout
    assert not (repo / "results.json").exists()


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_fine_tuned_models_run_on_a_gpu_worker_serves_its_adapter_fetched_from_adapter_url(
    gpu_cluster, owner, make_fine_tuned, tmp_path
):
    from harnesses.services import harness_create

    repo = git_repo_of(harness_copy(tmp_path), tmp_path / "repo")
    harness = harness_create(
        project=owner.project,
        created_by=owner.user,
        name="vllm",
        repo_url=repo,
        install_command="bash install.sh",
        run_command="python3 run.py",
        compute="gpu",
        gpu_type="A10G",
        env={"VLLM_BIN": "./fake_vllm.py", "VLLM_START_TIMEOUT": "60"},
    )
    model = make_fine_tuned()
    response = owner.api.post(
        f"/api/v1/models/{model.pk}/runs", {"harness": harness.pk}, format="json"
    )
    assert response.status_code == 201, response.content
    run = wait_for(
        lambda: (r := Run.objects.get(pk=response.json()["id"])).is_terminal and r,
        180,
        "the vLLM harness's run to finish",
        every=0.5,
        on_timeout=lambda: gpu_cluster.read_text()[-3000:],
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == 1.0  # asked of the adapter, not the base
    assert run.results["model"] == "llama-lora-v1" and run.results["adapter"] is True
    assert "--enable-lora --lora-modules llama-lora-v1=" in run.log_tail
    assert run.gpu_device.endswith("/0")
