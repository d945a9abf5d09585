"""The run page, live, under `make up`'s DEBUG: the log follows its end, stages and times show,
a failed run says why at the top, results read as tables, Cancel asks, Run again relaunches.

The log grows through the service the worker writes it with (`run_heartbeat`), while the page
polls, as it does when a real worker streams a sandbox's output.
"""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs import contract, services
from runs.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def running(owner, harness):
    """A run a worker has claimed, writing its log through the services."""
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        model="openai/gpt-4.1-mini",
        harness_snapshot={"name": harness.name, "run_command": harness.run_command},
    )
    services.run_claim(run_id=run.pk, worker="test")
    return run


class Log:
    """The run's output so far, stored the way the worker stores it."""

    def __init__(self, run):
        self.run, self.text = run, ""

    def write(self, lines: int, start: int) -> None:
        self.text += "".join(f"line {n:04d} of the output\n" for n in range(start, start + lines))
        services.run_heartbeat(run_id=self.run.pk, log_tail=self.text, log_size=len(self.text))


def log_box_at_end(page) -> bool:
    return page.evaluate(
        "(() => { const b = document.getElementById('run-log');"
        " return b.scrollHeight - b.scrollTop - b.clientHeight < 24; })()"
    )


def test_the_log_follows_new_output_at_the_bottom_and_stops_when_the_reader_scrolls_up(
    debug_page, running
):
    page = debug_page
    log = Log(running)
    log.write(200, 0)
    page.goto(f"/runs/{running.pk}/")
    box = page.locator("#run-log")
    expect(box).to_contain_text("line 0199")
    assert log_box_at_end(page), "the log did not open at its end"
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_hidden()

    # New output arrives while the reader is at the bottom: the box follows it.
    log.write(100, 200)
    expect(box).to_contain_text("line 0299")
    assert log_box_at_end(page), "the log did not follow new output"

    # The reader scrolls up: new output no longer moves them, and they can jump back.
    box.evaluate("b => { b.scrollTop = 100; }")
    expect(jump).to_be_visible()
    log.write(100, 300)
    expect(box).to_contain_text("line 0399")
    assert box.evaluate("b => b.scrollTop") == 100
    assert not log_box_at_end(page)
    jump.click()
    assert log_box_at_end(page)
    expect(jump).to_be_hidden()
    log.write(50, 400)
    expect(box).to_contain_text("line 0449")
    assert log_box_at_end(page), "after jumping to the end the log stopped following"


def test_stages_and_elapsed_time_show_while_the_run_runs(debug_page, running):
    page = debug_page
    page.goto(f"/runs/{running.pk}/")
    stages = page.locator("#run-stages")
    expect(stages.locator("[aria-current=step]")).to_contain_text("Cloning the repo")
    services.run_stage_advance(run_id=running.pk, stage="installing")
    expect(stages.locator("[aria-current=step]")).to_contain_text("Installing")
    expect(stages.locator("li.done")).to_have_text(["Cloning the repo"])
    services.run_stage_advance(run_id=running.pk, stage="running")
    expect(stages.locator("[aria-current=step]")).to_contain_text(re.compile(r"Running \d+\.\d s"))
    expect(page.locator("#run-elapsed")).to_contain_text(re.compile(r"running for \d"))


def test_a_truncated_log_says_so_and_starts_at_a_whole_line(debug_page, running):
    page = debug_page
    tail = "ut 0041\n" + "".join(f"line {n:04d}\n" for n in range(42, 60))
    services.run_heartbeat(run_id=running.pk, log_tail=tail, log_size=100_000)
    page.goto(f"/runs/{running.pk}/")
    expect(page.locator("#run-log-truncated")).to_have_text(
        "… earlier output truncated, showing the last 16 KB"
    )
    assert page.locator("#run-log").inner_text().startswith("line 0042\n")


def test_a_failed_run_shows_its_notes_in_a_banner_at_the_top_and_no_score_anywhere(
    debug_page, running
):
    page = debug_page
    services.run_finish(
        run_id=running.pk,
        status="failed",
        results={"score": 0.85, "tasks": [{"id": "t1", "passed": True}]},
        notes=["belvedir: the run command exited with code 2."],
        exit_code=2,
    )
    page.goto(f"/runs/{running.pk}/")
    banner = page.get_by_role("alert")
    expect(banner).to_contain_text("This run failed")
    expect(banner).to_contain_text("belvedir: the run command exited with code 2.")
    # The banner comes before everything else about the run.
    first = page.locator("#run-live > *").first
    expect(first).to_have_id("run-error")
    expect(page.locator("#run-score")).to_have_text("—")
    expect(page.locator("#results-score")).to_contain_text("—")
    expect(page.locator("#results-score")).to_contain_text("not counted because the run failed")
    expect(page.locator("#results-tasks")).to_contain_text("t1")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        re.compile(r"Smoke\s*·\s*openai/gpt-4\.1-mini")
    )


def test_a_finished_run_opens_with_its_log_at_the_end_and_raw_json_a_click_away(
    debug_page, running
):
    page = debug_page
    text = "".join(f"line {n:04d}\n" for n in range(300))
    services.run_finish(
        run_id=running.pk,
        status="succeeded",
        score=0.5,
        results={"score": 0.5, "per_task": {"a": 1, "b": 0}, "notes": "fine"},
        log_tail=text,
        log_size=len(text),
    )
    page.goto(f"/runs/{running.pk}/")
    assert log_box_at_end(page)
    expect(page.locator("#run-score")).to_have_text("0.500")
    expect(page.locator("#results-tasks tbody tr")).to_have_count(2)
    raw = page.locator("#results-raw pre")
    expect(raw).to_be_hidden()
    page.get_by_text("Raw results.json").click()
    expect(raw).to_contain_text('"per_task"')
    expect(page.locator("#results-other")).to_contain_text("Other fields (1)")


def test_cancel_asks_first_and_only_a_yes_cancels(debug_page, running):
    page = debug_page
    page.goto(f"/runs/{running.pk}/")
    asked = []

    def answer(dialog, accept):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.get_by_role("button", name="Cancel run").click()
    assert asked and "Cancel this run?" in asked[0]
    running.refresh_from_db()
    assert running.status == "running"

    page.once("dialog", lambda d: answer(d, True))
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#run-status")).to_have_text("cancelled")
    running.refresh_from_db()
    assert running.status == "cancelled"


@pytest.mark.docker
def test_run_again_creates_a_run_with_the_same_settings(debug_page, owner, make_harness):
    page = debug_page
    harness = make_harness(name="again")
    first = services.run_launch(
        project=owner.project,
        harness=harness,
        created_by=owner.user,
        model="openai/gpt-4.1-mini",
        model_api_key="sk-again-secret-123",
        attempts=2,
        grading="mean",
    )
    Run.objects.filter(pk=first.pk).update(status="failed", finished_at=timezone.now())
    page.goto(f"/runs/{first.pk}/")
    page.get_by_role("button", name="Run again").click()
    page.wait_for_url(lambda url: "/runs/run_" in url and first.pk not in url)
    again = Run.objects.exclude(pk=first.pk).get()
    assert page.url.endswith(f"/runs/{again.pk}/")
    assert (again.harness_id, again.model, again.attempts, again.grading) == (
        harness.pk,
        "openai/gpt-4.1-mini",
        2,
        "mean",
    )
    assert contract.run_model_secrets(again)["model_api_key"] == "sk-again-secret-123"
    assert "sk-again-secret-123" not in page.content()


def test_a_server_that_stops_answering_is_said_on_the_run_page_until_it_answers_again(
    debug_page, running
):
    page = debug_page
    page.goto(f"/runs/{running.pk}/")
    polls = re.compile(rf"/runs/{running.pk}/")  # both of the page's polls
    page.route(polls, lambda route: route.abort())
    expect(page.locator("#page-error")).to_contain_text("could not be reached")
    page.unroute(polls)
    expect(page.locator("#page-error")).to_be_empty()
    expect(page.locator("#run-status")).to_have_text("running")
