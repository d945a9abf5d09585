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

from tests.helpers.run_fixtures import worker_env
from tests.helpers.task_sandboxes import (
    Client,
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    remove_task_images,
)
from tests.router.helpers import serving_app

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


@pytest.fixture
def asgi_url(sandbox_settings, tmp_path):
    with serving_app(tmp_path, **worker_env(sandbox_settings)) as url:
        yield url


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


def test_under_the_asgi_server_an_oversized_or_unsized_upload_is_refused_before_it_is_read(
    owner, asgi_url
):
    """Django's ASGI handler spools a whole body to disk before any view runs: a task
    sandbox's upload must say its length, and one past the limit is refused at once."""
    import http.client

    run, key = make_managed_run(owner)
    host, port = asgi_url.removeprefix("http://").split(":")

    def send(method: str, path: str, headers: dict[str, str], body: bytes = b""):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.putrequest(method, path)
            for name, value in {"Authorization": f"Bearer {key}", **headers}.items():
                connection.putheader(name, value)
            connection.endheaders(body or None)
            answer = connection.getresponse()
            return answer.status, json.loads(answer.read() or b"{}")
        finally:
            connection.close()

    files = "/api/v1/task-sandboxes/tsb_x/files?path=/app"
    status, body = send("PUT", files, {"Content-Length": str(2**30 + 1)})  # no body sent
    assert (status, body["code"]) == (413, "too_large")
    status, body = send(
        "POST",
        "/api/v1/task-sandboxes",
        {"Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(2**29)},
    )
    assert (status, body["code"]) == (413, "too_large")
    status, body = send("PUT", files, {"Transfer-Encoding": "chunked"}, b"5\r\nhello\r\n0\r\n\r\n")
    assert (status, body["code"]) == (411, "length_required")


def test_many_quiet_exec_streams_do_not_hold_up_another_ones_output(owner, asgi_url):
    """Each exec stream waits up to 15 s (the heartbeat) for its next line in a thread:
    taken from asyncio's default pool (cpu count + 4 threads), eight quiet commands left a
    ninth's output waiting for a free thread."""
    from concurrent.futures import ThreadPoolExecutor

    run, key = make_managed_run(owner)
    client = Client(asgi_url, key)
    created = client.create("busy", context_tar(fresh_dockerfile()))
    assert created.status == 201, created.body
    sandbox = created.json()

    def open_exec(command: str):
        request = urllib.request.Request(
            f"{asgi_url}/api/v1/task-sandboxes/{sandbox['id']}/exec",
            data=json.dumps({"command": command, "timeout_sec": 30}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        return urllib.request.urlopen(request, timeout=60)

    try:
        with ThreadPoolExecutor(8) as pool:
            quiet = list(pool.map(lambda _: open_exec("sleep 25"), range(8)))
        time.sleep(2)  # each quiet stream now waits in a thread for its next line
        began = time.monotonic()
        with open_exec("echo quick") as answer:
            first = json.loads(answer.readline())
        waited = time.monotonic() - began
        assert first == {"stream": "stdout", "data": "quick\n"}
        assert waited < 5, f"the quick command's output came after {waited:.1f} s"
        for answer in quiet:
            answer.close()
    finally:
        client.stop(sandbox["id"])
        remove_task_images({sandbox["image"]})
