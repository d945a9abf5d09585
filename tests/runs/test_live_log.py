"""The live log, end to end: output reaches the API while the run is still going."""

import time

import pytest

from runs.executor import execute_run
from runs.models import Run
from tests.runs.helpers import Background, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def test_the_log_grows_while_the_run_runs_and_offsets_return_only_new_text(
    sandbox_settings, launch, owner
):
    run = launch(env={"SLEEP": "5"})
    worker = Background(run.pk)
    url = f"/api/v1/runs/{run.pk}/log"

    def first_ticks():
        body = owner.api.get(url, {"offset": 0}).json()
        return body if "tick 1" in body["text"] else None

    first = wait_for(first_ticks, 20, "the first ticks in the log")
    assert first["status"] == "running", "the log only arrived after the run ended"
    assert first["truncated"] is False
    assert "tick 4" not in first["text"]
    assert first["offset"] == len(first["text"])

    pieces, offset, status = [first["text"]], first["offset"], first["status"]
    while status == "running":
        time.sleep(0.3)
        body = owner.api.get(url, {"offset": offset}).json()
        assert body["offset"] >= offset
        assert body["offset"] - offset == len(body["text"])
        pieces.append(body["text"])
        offset, status = body["offset"], body["status"]
    assert worker.join() == "succeeded"

    assert sum(1 for p in pieces[1:] if p) >= 2, "the log did not arrive in several pieces"
    assert all("starting in" not in p for p in pieces[1:]), "old text was sent again"
    run.refresh_from_db()
    assert "".join(pieces) == run.log_tail  # nothing lost, nothing twice
    assert owner.api.get(url, {"offset": offset}).json()["text"] == ""


def test_the_stored_log_tail_is_the_last_16_kb(sandbox_settings, launch, owner):
    run = launch(env={"SPAM_KB": "64"})
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.notes
    assert len(run.log_tail.encode("utf-8")) <= 16 * 1024
    assert len(run.log_tail.encode("utf-8")) > 15 * 1024
    assert "spam 000063" in run.log_tail and "done" in run.log_tail
    assert "spam 000000" not in run.log_tail and "installing" not in run.log_tail
    assert run.log_size > 64 * 1000

    body = owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 0}).json()
    assert body["truncated"] is True
    assert body["text"] == run.log_tail and body["offset"] == run.log_size


def test_the_run_page_follows_a_running_run(sandbox_settings, launch, owner):
    run = launch(env={"SLEEP": "3"})
    worker = Background(run.pk)
    wait_for(lambda: "tick" in Run.objects.get(pk=run.pk).log_tail, 20, "ticks in the stored log")
    live = owner.web.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    html = live.content.decode()
    assert 'id="run-status">running<' in html
    assert 'hx-trigger="every 1s"' in html  # keeps polling while running
    log_url = f"/runs/{run.pk}/?fragment=log"
    log = owner.web.get(log_url, HTTP_HX_REQUEST="true").content.decode()
    assert "tick 0" in log and 'hx-trigger="every 1s"' in log
    # The log's next poll names the size it has: unchanged, the answer is empty (204).
    size = Run.objects.get(pk=run.pk).log_size
    unchanged = owner.web.get(f"{log_url}&size={size}", HTTP_HX_REQUEST="true")
    assert unchanged.status_code in (200, 204)  # 200 only if output arrived meanwhile
    assert worker.join() == "succeeded"

    done = owner.web.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="run-status">succeeded<' in done and "0.850" in done
    assert "every 1s" not in done  # stops polling once it ended
    final = owner.web.get(f"{log_url}&size={size}", HTTP_HX_REQUEST="true")
    assert final.status_code == 200 and "every 1s" not in final.content.decode()
