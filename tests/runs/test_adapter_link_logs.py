"""The signed adapter link never reaches a log: the web server's access log and Django's
4xx warnings print the request path, and the token in it is redacted (the run id stays)."""

import logging
import sys

import pytest
import requests
from django.utils import timezone

from belvedir.logfilters import RedactSignedPaths
from runs import contract, services
from runs.models import Run, Status
from tests.helpers import aio
from tests.helpers.adapters import adapter_zip_bytes

pytestmark = pytest.mark.usefixtures("gpu_settings")


def test_the_filter_redacts_the_token_in_messages_and_arguments():
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/api/v1/adapters/run_abc/eyJyIjoi.Zm9v.c2ln?x=1", "1.1", 200),
        None,
    )  # fmt: skip
    assert RedactSignedPaths().filter(record)
    assert record.getMessage() == (
        '127.0.0.1:5 - "GET /api/v1/adapters/run_abc/[redacted]?x=1 HTTP/1.1" 200'
    )


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_the_asgi_servers_logs_never_show_the_adapter_token(
    owner, make_fine_tuned, make_harness, tmp_path, media_root
):
    from django.db import connection

    from tests.router.helpers import free_port, start_uvicorn

    model = make_fine_tuned()
    harness = make_harness(name="vllm-eval", compute="gpu", gpu_type="A10G")
    run = services.run_launch_fine_tuned(fine_tuned_model=model, harness=harness)
    Run.objects.filter(pk=run.pk).update(status=Status.RUNNING, started_at=timezone.now())
    run.refresh_from_db()
    path = contract.run_fine_tuned_env(run, base_url="")["ADAPTER_URL"]
    token = path.rsplit("/", 1)[1]

    port = free_port()
    log_path = tmp_path / "uvicorn.log"
    process = start_uvicorn(
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=log_path,
        command=[sys.executable, "-m", "uvicorn", "belvedir.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "info"],
        BELVEDIR_MEDIA_ROOT=str(media_root),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        served = requests.get(base + path, timeout=30)
        assert served.status_code == 200 and served.content == adapter_zip_bytes()
        assert requests.get(base + path[:-2] + "xx", timeout=30).status_code == 403
        Run.objects.filter(pk=run.pk).update(status=Status.SUCCEEDED, finished_at=timezone.now())
        assert requests.get(base + path, timeout=30).status_code == 403
    finally:
        process.terminate()
        process.wait(timeout=20)
    logged = log_path.read_text()
    assert f"/api/v1/adapters/{run.pk}/[redacted]" in logged  # the access log is on
    assert "Forbidden" in logged  # and Django's 403 warning was written
    assert token not in logged and token[:20] not in logged


@pytest.mark.docker
@pytest.mark.django_db
def test_the_adapter_download_streams_under_asgi_without_reading_the_file_whole(
    owner, make_fine_tuned, make_harness, django_capture_on_commit_callbacks, monkeypatch
):
    """Served asynchronously (uvicorn), Django's FileResponse read the whole zip into a list
    before its first byte went out; the download now reads one block at a time."""

    from django.test import RequestFactory

    from runs.adapters import AdapterDownloadView

    model = make_fine_tuned()
    harness = make_harness(name="vllm-eval", compute="gpu", gpu_type="A10G")
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_launch_fine_tuned(fine_tuned_model=model, harness=harness)
    Run.objects.filter(pk=run.pk).update(status=Status.RUNNING, started_at=timezone.now())
    run.refresh_from_db()
    path = contract.run_fine_tuned_env(run, base_url="")["ADAPTER_URL"]
    token = path.rsplit("/", 1)[1]
    response = AdapterDownloadView.as_view()(RequestFactory().get(path), run_id=run.pk, token=token)
    handle, whole = response.file_to_stream, adapter_zip_bytes()

    async def first_then_rest():
        parts = aiter(response)
        first = await anext(parts)
        position = handle.tell()
        return first, position, first + b"".join([part async for part in parts])

    monkeypatch.setattr("belvedir.files.READ_BYTES", 0)  # blocks of block_size: several here
    response.block_size = 64
    first, position, content = aio.run(first_then_rest())
    response.close()
    assert len(whole) > 4 * 64
    assert len(first) == 64 and position == 64  # only the first block read when it is sent
    assert content == whole
