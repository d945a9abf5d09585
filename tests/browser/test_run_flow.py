"""A run launched from the browser streams its log and ends with a score, through a real worker."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def test_a_run_launched_from_the_harness_page_streams_its_log_and_shows_its_score(
    sandbox_settings,
    cluster,
    signed_in_page,
    make_harness,
):
    page = signed_in_page
    harness = make_harness(name="browser run", env={"SLEEP": "4", "ECHO_SECRET": "1"})
    page.goto(f"/harnesses/{harness.pk}/")
    page.click("text=New benchmark")
    dialog = page.locator("#launch-dialog")
    dialog.locator("input[name=model]").fill("openai/gpt-4.1-mini")
    dialog.locator("input[name=model_api_key]").fill("sk-browser-secret-123456")
    dialog.locator("select[name=grading]").select_option("mean")
    dialog.locator("button[type=submit]").click()

    page.wait_for_url(re.compile(r"/runs/run_[a-z0-9]+/$"))
    run = Run.objects.get(harness=harness)
    assert (run.model, run.grading) == ("openai/gpt-4.1-mini", "mean")
    # The log arrives while the run is still going.
    expect(page.locator("#run-log")).to_contain_text("tick 1", timeout=30_000)
    assert Run.objects.get(pk=run.pk).status == "running"
    # The stage the worker is in shows with its time, and the log box keeps up with the output.
    current = page.locator("#run-stages [aria-current=step]")
    expect(current).to_contain_text(re.compile(r"Running \d+\.\d s"))
    expect(page.locator("#run-log")).to_contain_text("belvedir: starting the run command")
    expect(page.locator("#run-log")).to_contain_text("tick 3", timeout=30_000)
    assert page.locator("#run-log").evaluate(
        "b => b.scrollHeight - b.scrollTop - b.clientHeight < 24"
    ), "the log box is not at its end while output arrives"
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=30_000)
    expect(page.locator("#run-stages li.done")).to_have_count(4)
    expect(page.locator("#run-score")).to_have_text("0.850")
    content = page.content()
    assert "sk-browser-secret-123456" not in content
    assert "[redacted]" in page.locator("#run-log").inner_text()

    page.goto(f"/runs/?harness={harness.pk}")
    expect(page.locator("#run-table .badge")).to_have_text("succeeded")
