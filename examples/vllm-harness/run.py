"""A GPU harness: serves MODEL with vLLM, with the fine-tuned model's LoRA adapter from
ADAPTER_URL (--enable-lora), asks it a handful of tasks and writes results.json with `model` =
MODEL_LABEL. Standard library only; vLLM comes from install.sh (or VLLM_BIN)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RANKS = (8, 16, 32, 64, 128, 256, 320, 512)  # the --max-lora-rank values vLLM accepts


class Stop(Exception):
    """The run cannot go on; the message says why."""


def log(message: str) -> None:
    print(f"vllm-harness: {message}", flush=True)


def fetch_adapter(url: str, into: Path) -> Path:
    """The adapter zip at `url` unpacked into `into`: the folder holding adapter_config.json
    (at the top of the zip or in one folder, as the platform accepts it)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "adapter.zip"
    try:
        with urllib.request.urlopen(url, timeout=600) as answer, archive.open("wb") as out:
            shutil.copyfileobj(answer, out, 1 << 20)
    except (urllib.error.URLError, OSError) as exc:
        raise Stop(f"could not download the adapter (ADAPTER_URL): {exc}") from None
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(into / "unpacked")  # extractall keeps every name inside the folder
    archive.unlink()
    for config in sorted((into / "unpacked").glob("**/adapter_config.json")):
        return config.parent
    raise Stop("the adapter zip holds no adapter_config.json")


def lora_rank(adapter: Path) -> int:
    """The smallest --max-lora-rank that holds the adapter's rank `r` (16 without one)."""
    rank = json.loads((adapter / "adapter_config.json").read_text()).get("r") or 16
    return next((r for r in RANKS if r >= int(rank)), RANKS[-1])


def vllm_command(env, *, model: str, label: str, port: int, adapter: Path | None) -> list[str]:
    binary = env.get("VLLM_BIN") or (
        str(HERE / ".venv/bin/vllm") if (HERE / ".venv/bin/vllm").exists() else "vllm"
    )
    command = [binary, "serve", model, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--served-model-name", model]
    if adapter is not None:
        command += ["--enable-lora", "--lora-modules", f"{label}={adapter}"]
        command += ["--max-lora-rank", str(lora_rank(adapter))]
    return command + shlex.split(env.get("VLLM_ARGS", ""))


def call(url: str, body: dict | None = None, timeout: float = 300) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def wait_ready(base: str, label: str, server: subprocess.Popen, timeout: float) -> None:
    """Until vLLM lists `label` among its models; Stop if it exits or takes past `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise Stop(f"vLLM exited with code {server.returncode} before it served {label}")
        try:
            served = [m["id"] for m in call(f"{base}/models", timeout=5)["data"]]
            if label in served:
                return
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass
        time.sleep(1)
    raise Stop(f"vLLM did not serve {label} within {timeout:.0f} s (VLLM_START_TIMEOUT)")


def load_tasks(env) -> list[dict]:
    """The Tasks field (BELVEDIR_TASKS_FILE: a JSON list, {"tasks": [...]} or JSON Lines,
    docs/tasks-format.md), else this harness's own tasks.json."""
    path = env.get("BELVEDIR_TASKS_FILE") or str(HERE / "tasks.json")
    text = Path(path).read_text(encoding="utf-8").strip()
    if text.startswith("["):
        items = json.loads(text)
    elif text.startswith("{") and "\n{" not in text:
        items = json.loads(text).get("tasks", [])
    else:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [{"id": str(t.get("id") or f"task-{n}"), **t} for n, t in enumerate(items, 1)]


def correct(reply: str, answer: str) -> bool:
    """The recorded answer appears in the reply as a word (case and punctuation aside)."""
    said = " ".join(w.strip(".") for w in re.sub(r"[^\w.]+", " ", reply.lower()).split())
    wanted = " ".join(answer.lower().split())
    return re.search(rf"(^| ){re.escape(wanted)}( |$)", said) is not None


def grade(attempts: list[float], grading: str) -> float:
    if grading == "pass@k":
        return max(attempts)
    if grading == "mean":
        return sum(attempts) / len(attempts)
    return attempts[0]  # pass@1


def benchmark(env, base: str, label: str) -> dict:
    attempts = int(env.get("BELVEDIR_TASK_ATTEMPTS") or 1)
    grading = env.get("BELVEDIR_GRADING") or "pass@1"
    tasks, errored = {}, {}
    for task in load_tasks(env):
        if task.get("answer") in (None, ""):
            errored[task["id"]] = "no recorded answer: this harness grades by the answer"
            continue
        scores = []
        for attempt in range(attempts):
            reply = call(
                f"{base}/chat/completions",
                {
                    "model": label,
                    "messages": [{"role": "user", "content": task["prompt"]}],
                    "max_tokens": 64,
                    "temperature": 0 if attempt == 0 else 0.7,
                },
            )["choices"][0]["message"]["content"]
            scores.append(1.0 if correct(reply or "", str(task["answer"])) else 0.0)
            log(f"{task['id']} attempt {attempt + 1}: {'right' if scores[-1] else 'wrong'}")
        tasks[task["id"]] = {"score": grade(scores, grading), "attempts": scores}
    results: dict = {"tasks": tasks, "grading": grading}
    if tasks:
        results["score"] = sum(t["score"] for t in tasks.values()) / len(tasks)
    if errored:
        results["errored"] = errored
    return results


def main(env=os.environ) -> int:
    model = env.get("MODEL", "").strip()
    if not model:
        log("MODEL is not set: the Hugging Face id of the base model to serve")
        return 2
    label = env.get("MODEL_LABEL") or model
    port = int(env.get("VLLM_PORT") or 8011)
    base = f"http://127.0.0.1:{port}/v1"
    server = None
    try:
        adapter = (
            fetch_adapter(env["ADAPTER_URL"], HERE / "adapter") if env.get("ADAPTER_URL") else None
        )
        command = vllm_command(env, model=model, label=label, port=port, adapter=adapter)
        log(
            f"serving {model}{f' with the adapter as {label}' if adapter else ''}: {shlex.join(command)}"
        )
        with (HERE / "vllm.log").open("wb") as out:
            server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        served = label if adapter else model  # the adapter's name, else the base's
        wait_ready(base, served, server, float(env.get("VLLM_START_TIMEOUT") or 1800))
        results = benchmark(env, base, served)
    except Stop as exc:
        log(str(exc))
        tail = (
            (HERE / "vllm.log").read_text(errors="replace")[-3000:]
            if (HERE / "vllm.log").exists()
            else ""
        )
        print(tail, flush=True)
        return 1
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    results |= {"model": label, "base_model": model, "adapter": adapter is not None}
    (Path.cwd() / "results.json").write_text(json.dumps(results, indent=2))
    log(f"score {results.get('score')} over {len(results['tasks'])} tasks as {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
