"""The Belvedir Harbor environment under Harbor itself (the Harbor image), against the platform's
task-sandbox API: what Harbor's BaseEnvironment asks of an environment, with the semantics of
Harbor's own Docker environment. `exec(user=...)` is `docker exec -u` (root when asked even
if the image's USER is another, a uid with no passwd entry too), `start(force_build=True)`
builds the image again, cwd/env/timeout hold, files and directories go in and out, and
`stop(delete=False)` stops it (Harbor's Docker environment removes the container either way;
`delete` is about images and volumes)."""

import json
import shutil

import pytest

from harbor.models import TaskSandbox
from tests.drivers.helpers import HARBOR
from tests.helpers.harbor import harbor, harbor_image
from tests.helpers.task_sandboxes import (
    BASE_IMAGE,
    Client,
    context_tar,
    make_managed_run,
    remove_task_images,
)
from tests.runs.helpers import wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]

SCRIPT = """
import asyncio, json, sys
from pathlib import Path
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths
from belvedir_harbor.environment import BelvedirEnvironment

async def main(env_dir, work):
    work = Path(work)
    env = BelvedirEnvironment(
        environment_dir=Path(env_dir), environment_name="semantics",
        session_id="semantics__abc__env", trial_paths=TrialPaths(work / "trial"),
        task_env_config=EnvironmentConfig(),
    )
    out = {}
    await env.start(force_build=True)
    try:
        out["default"] = (await env.exec("id -un")).stdout.strip()
        out["root"] = (await env.exec("id -un", user="root")).stdout.strip()
        out["uid"] = (await env.exec("id -u", user=4321)).stdout.strip()
        shaped = await env.exec('echo "$FOO $(pwd)"; exit 4', cwd="/tmp", env={"FOO": "bar"})
        out["shaped"] = [shaped.stdout, shaped.return_code]
        try:
            await env.exec("sleep 30", timeout_sec=2)
            out["timeout"] = "none"
        except Exception as exc:
            out["timeout"] = type(exc).__name__
        (work / "in").mkdir()
        (work / "in" / "sub").mkdir()
        (work / "in" / "a.txt").write_text("A")
        (work / "in" / "sub" / "b.txt").write_text("B")
        (work / "one.txt").write_text("one")
        await env.upload_dir(work / "in", "/logs/agent/updir")
        await env.upload_file(work / "one.txt", "/logs/agent/files/renamed.txt")
        out["listed"] = (await env.exec("cd /logs/agent/updir && find . -type f | sort")).stdout
        out["is_dir"] = [await env.is_dir("/logs/agent/updir"), await env.is_file("/logs/agent/updir")]
        await env.download_file("/logs/agent/files/renamed.txt", work / "back" / "renamed.txt")
        await env.download_dir("/logs/agent/updir", work / "back" / "dir")
        out["back"] = sorted(
            str(p.relative_to(work / "back")) for p in (work / "back").rglob("*") if p.is_file()
        )
    finally:
        await env.stop(delete=False)  # Harbor's --no-delete keeps images, not containers
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.fixture(scope="module")
def image():
    return harbor_image()


def test_the_environment_keeps_harbors_exec_and_file_semantics(
    image, owner, sandbox_settings, live_server, tmp_path
):
    dockerfile = (
        f"FROM {BASE_IMAGE}\nUSER root\nRUN mkdir -p /app\nLABEL belvedir.test-marker={tmp_path.name}"
        "\nUSER nobody\n"
    )
    run, key = make_managed_run(owner)
    warm = Client(live_server.url, key).create("warm", context_tar(dockerfile))  # now cached
    assert warm.status == 201, warm.body
    Client(live_server.url, key).stop(warm.json()["id"])
    environment = tmp_path / "environment"
    environment.mkdir()
    (environment / "Dockerfile").write_text(dockerfile)
    driver = tmp_path / "harness-harbor"
    shutil.copytree(HARBOR, driver)
    (tmp_path / "work").mkdir()
    try:
        done = harbor(
            image,
            tmp_path,
            *("python3", "-c", SCRIPT, str(environment), str(tmp_path / "work")),
            env={
                "PYTHONPATH": str(driver),
                "BELVEDIR_BASE_URL": live_server.url,
                "BELVEDIR_API_KEY": key,
            },
            timeout=600,
        )
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
        out = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        remove_task_images({warm.json()["image"]})

    assert out["default"] == "nobody"  # the image's USER, as docker exec without -u
    assert out["root"] == "root" and out["uid"] == "4321"
    assert out["shaped"] == ["bar /tmp\n", 4]
    assert out["timeout"] == "TimeoutError"
    assert out["listed"] == "./a.txt\n./sub/b.txt\n"
    assert out["is_dir"] == [True, False]
    assert out["back"] == ["dir/a.txt", "dir/sub/b.txt", "renamed.txt"]
    # Harbor's process exits once its stop has reached the platform, not when it is answered
    # (belvedir_harbor/stops.py): the platform finishes the stop just after.
    started = wait_for(
        lambda: (
            (s := TaskSandbox.objects.get(run=run, name="semantics__abc__env")).status == "stopped"
            and s
        ),
        30,
        "the platform to finish the task sandbox's stop",
    )
    assert started.status == "stopped" and started.cached is False  # force_build: built again
    run.refresh_from_db()
    assert run.status == "running"  # stopped by stop(), not by the run's end
