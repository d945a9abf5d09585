"""Task sandboxes under the ASGI server production runs (uvicorn, `make up`): an exec's output
and a download stream as they come. Django's StreamingHttpResponse reads a sync iterator whole
under ASGI before sending a byte, so a long command sent nothing (the driver's read timed out
after 120 s) and a download sat in memory."""

import io
import json
import tarfile
import time
import urllib.request

import pytest
from django.db import connection

from tests.helpers.run_fixtures import worker_env
from tests.helpers.task_sandboxes import (
    Client,
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    remove_task_images,
)
from tests.router.helpers import free_port, start_uvicorn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


@pytest.fixture
def asgi_url(sandbox_settings, tmp_path):
    port = free_port()
    process = start_uvicorn(
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / "uvicorn.log",
        **worker_env(sandbox_settings),
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_exec_output_and_downloads_stream_under_the_asgi_server(owner, asgi_url):
    run, key = make_managed_run(owner)
    client = Client(asgi_url, key)
    created = client.create("streamed", context_tar(fresh_dockerfile()))
    assert created.status == 201, created.body
    sandbox = created.json()
    try:
        request = urllib.request.Request(
            f"{asgi_url}/api/v1/task-sandboxes/{sandbox['id']}/exec",
            data=json.dumps({"command": "echo first; sleep 8; echo second"}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        began = time.monotonic()
        with urllib.request.urlopen(request, timeout=30) as answer:
            first = json.loads(answer.readline())
            first_after = time.monotonic() - began
            rest = [json.loads(line) for line in answer]

        assert first == {"stream": "stdout", "data": "first\n"}
        assert first_after < 5, f"the first line came after {first_after:.1f} s"
        assert rest[-1] == {"exit_code": 0, "timed_out": False}

        client.exec_lines(sandbox["id"], "mkdir -p /out && echo hi > /out/a.txt")
        download = client.get_files(sandbox["id"], "/out")
        assert download.status == 200, download.body
        with tarfile.open(fileobj=io.BytesIO(download.body)) as tar:
            assert tar.extractfile("out/a.txt").read() == b"hi\n"
    finally:
        client.stop(sandbox["id"])
        remove_task_images({sandbox["image"]})
