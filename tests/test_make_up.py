"""`make up`'s script serves the platform with demo data, and a worker runs the demo harness."""

import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.helpers.databases import database_exists, unmade_database_url

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_gateway_port() -> int:
    """A free port of the sandbox port range on the sandbox network's gateway IP."""
    ports = list(range(18700, 18800))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("172.30.0.1", port))
            except OSError:
                continue
            return port
    pytest.fail("no free port in 18700-18799 on 172.30.0.1")


@pytest.fixture
def database_url():
    with unmade_database_url("belvedir_up") as url:
        yield url


def _up(env: dict, log: Path) -> subprocess.Popen:
    """scripts/up.sh started as `make up` does, once its web server listens."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "scripts/up.sh"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 90
    while b"Uvicorn running on" not in log.read_bytes():  # scripts/serve.sh
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            pytest.fail(log.read_text())
        time.sleep(0.3)
    return process


def _stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_up_serves_the_demo_and_runs_the_demo_harness_to_a_score(tmp_path, database_url):
    port = free_port()
    key_file = tmp_path / "make-up-key"
    env = {
        **os.environ,
        "PORT": str(port),
        "GATEWAY_PORT": str(free_gateway_port()),
        "DATABASE_URL": database_url,  # on PostgreSQL, made by the script: a fresh machine's
        "MAKE_UP_KEY_FILE": str(key_file),
    }
    base = f"http://127.0.0.1:{port}"
    process = _up(env, tmp_path / "up.log")
    try:
        text = (tmp_path / "up.log").read_text()
        assert database_exists(database_url), text
        assert "demo@belvedir.local / belvedir-demo" in text
        assert f"Sandboxes  reach the platform at http://172.30.0.1:{env['GATEWAY_PORT']}" in text
        key = re.search(r"API key\s+(bv_live_\S+)", text).group(1)
        assert key_file.read_text().strip() == key and key_file.stat().st_mode & 0o077 == 0
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {key}"
        (harness,) = api.get(f"{base}/api/v1/harnesses", timeout=10).json()["results"]
        assert harness["name"] == "Demo contract harness"
        launched = api.post(
            f"{base}/api/v1/runs",
            json={"harness": harness["id"], "model": "demo", "model_api_key": "sk-demo"},
            timeout=30,
        )
        assert launched.status_code == 201, launched.text
        run_id = launched.json()["id"]
        deadline = time.monotonic() + 90
        while (run := api.get(f"{base}/api/v1/runs/{run_id}", timeout=10).json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, run
            time.sleep(0.5)
        assert run["status"] == "succeeded", run
        assert run["score"] == pytest.approx(0.85)
        login = requests.Session()
        page = login.get(f"{base}/login/", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        signed_in = login.post(
            f"{base}/login/",
            data={
                "username": "demo@belvedir.local",
                "password": "belvedir-demo",
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": f"{base}/login/"},
            timeout=10,
        )
        assert signed_in.url == f"{base}/" and "Next steps" in signed_in.text  # the home page
        assert "Demo contract harness" in login.get(f"{base}/harnesses/", timeout=10).text
        css = login.get(f"{base}/static/belvedir.css", timeout=10)
        assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")
    finally:
        _stop(process)
    # A restart keeps what the user had: still signed in, and the same API key printed.
    process = _up(env, tmp_path / "up-again.log")
    try:
        again = re.search(r"API key\s+(bv_live_\S+)", (tmp_path / "up-again.log").read_text())
        assert again.group(1) == key
        page = login.get(f"{base}/harnesses/", timeout=10)
        assert page.url == f"{base}/harnesses/" and "Demo contract harness" in page.text
        assert api.get(f"{base}/api/v1/harnesses", timeout=10).status_code == 200
    finally:
        _stop(process)
