"""The environment task editor in Chromium: verifier fields follow the kind picked, rows and
files are added without losing what was typed, a bad task is refused on its row, and the
saved environment backs a harness; generation polls its progress into a preview."""

import json
import threading

import pytest
from django.db import connection
from playwright.sync_api import expect

from harnesses import environments, generation
from harnesses.models import Environment, EnvironmentGeneration, Harness
from tests.helpers.scripted_model import ScriptedModel

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def editor_answer(page):
    return page.expect_response(lambda r: "/environments/" in r.url and r.request.method == "POST")


def task(page, index: int):
    return page.locator(f"#task-{index}")


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_writing_an_environment_in_the_task_editor(debug_page, owner):
    page = debug_page
    page.goto("/environments/")
    page.get_by_role("link", name="New environment").click()
    page.get_by_label("Name", exact=True).fill("Support")
    first = task(page, 0)
    first.get_by_label("Prompt").fill("A customer asks for a refund after 40 days.")
    expect(first.get_by_label("Criteria, one a line")).to_be_hidden()
    first.get_by_label("Verifier").select_option("rubric")
    expect(first.get_by_label("Criteria, one a line")).to_be_visible()
    expect(first.get_by_label("verify(answer, state) source")).to_be_hidden()
    first.get_by_label("Criteria, one a line").fill("Cites the 30-day policy\nOffers store credit")

    with editor_answer(page):
        page.get_by_role("button", name="Add task").click()
    expect(task(page, 1)).to_be_visible()
    expect(task(page, 0).get_by_label("Prompt")).to_have_value(
        "A customer asks for a refund after 40 days."
    )
    second = task(page, 1)
    second.get_by_label("Id").fill("sum")
    second.get_by_label("Prompt").fill("What is 2+2?")
    second.get_by_label("Recorded answer").fill("4")
    second.get_by_label("Verifier").select_option("code")
    second.get_by_label("verify(answer, state) source").fill("print('no verify here')")

    with editor_answer(page) as answer:
        page.get_by_role("button", name="Save environment").click()
    assert answer.value.status == 400
    expect(task(page, 1)).to_have_class("task has-error")
    expect(task(page, 1).locator(".errorlist")).to_contain_text(
        "tasks[1] (id 'sum'): verifier.source must define verify(answer, state)"
    )
    expect(page.locator("header.top nav")).to_be_visible()  # the page was kept
    assert not Environment.objects.exists()

    task(page, 1).get_by_label("verify(answer, state) source").fill(
        "def verify(answer, state):\n    return answer.strip() == '4'\n"
    )
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_url("**/environments/env_*/")
    expect(page.locator("#tasks")).to_contain_text("Cites the 30-day policy")
    expect(page.locator('#tasks tr[data-task="sum"]')).to_contain_text("code")
    env = Environment.objects.get(project=owner.project)
    kinds = [t["verifier"]["kind"] for t in environments.environment_tasks(environment=env)]
    assert kinds == ["rubric", "code"]

    # The one-sandbox Runner refuses the code task, naming it; Runner on Harbor takes both.
    with page.expect_response(lambda r: "/harness/" in r.url) as answer:
        page.locator('#use-in-harness button[data-preset="runner"]').click()
    assert answer.value.status == 400
    expect(page.locator("#page-error")).to_contain_text("run under Harbor only (sum)")
    page.locator('#use-in-harness button[data-preset="harbor-runner"]').click()
    page.wait_for_url("**/harnesses/har_*/")
    harness = Harness.objects.get(project=owner.project)
    assert harness.preset == "harbor-runner" and len(json.loads(harness.tasks)) == 2


def test_state_diff_files_are_added_and_saved(debug_page, owner):
    page = debug_page
    page.goto("/environments/new/")
    page.get_by_label("Name", exact=True).fill("Files")
    row = task(page, 0)
    row.get_by_label("Prompt").fill("Turn debug off in app/config.ini")
    row.get_by_label("Verifier").select_option("state_diff")
    row.get_by_label("Setup file path").fill("app/config.ini")
    row.get_by_label("Setup file text").fill("debug=true\n")
    with editor_answer(page):
        row.get_by_role("button", name="Add golden file").click()
    row = task(page, 0)
    expect(row.get_by_label("Golden file path")).to_have_count(2)
    expect(row.get_by_label("Setup file path")).to_have_value("app/config.ini")
    row.get_by_label("Golden file path").nth(1).fill("app/config.ini")
    row.get_by_label("Golden file text").nth(1).fill("debug=false\n")
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_url("**/environments/env_*/")
    env = Environment.objects.get(project=owner.project)
    verifier = environments.environment_tasks(environment=env)[0]["verifier"]
    assert verifier == {
        "kind": "state_diff",
        "setup_state": {"app/config.ini": "debug=true\n"},
        "golden": {"app/config.ini": "debug=false\n"},
    }


TASKS = [
    {"id": "capital", "prompt": "Capital of France?", "answer": "Paris"},
    {"id": "prime", "prompt": "Name a prime above 10.", "answer": "11"},
]


def run_job(generation_id: str) -> None:
    """The generation job, in a thread of its own (Playwright's loop holds this one)."""
    try:
        generation.generation_execute(generation_id=generation_id)
    finally:
        connection.close()


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_generating_polls_progress_into_a_preview_to_save(debug_page, owner):
    page = debug_page
    with ScriptedModel([json.dumps(TASKS)]) as model:
        page.goto("/environments/generate/")
        form = page.locator("#generate-form")
        form.get_by_label("Description").fill("General knowledge questions")
        form.get_by_label("Name").fill("Trivia")
        form.get_by_label("Count").fill("2")
        form.locator("#id_model").fill("acme/writer-1")
        form.get_by_label("Model API base").fill(model.base_url)
        form.get_by_label("Model API key").fill("sk-test")
        expect(form.get_by_label("Belvedir Runner on Harbor")).to_be_checked()
        form.get_by_role("button", name="Generate tasks").click()
        page.wait_for_url("**/environments/generations/gen_*/")
        expect(page.locator("#generation")).to_contain_text("Queued.")
        row = EnvironmentGeneration.objects.get(project=owner.project)
        job = threading.Thread(target=run_job, args=[row.pk])
        job.start()
        job.join(timeout=60)
    expect(page.get_by_role("heading", name="Review the generated tasks")).to_be_visible()
    expect(task(page, 1).get_by_label("Prompt")).to_have_value("Name a prime above 10.")
    task(page, 1).get_by_label("Recorded answer").fill("13")
    page.get_by_role("button", name="Save environment").click()
    page.wait_for_url("**/environments/env_*/")
    expect(page.locator('#tasks tr[data-task="prime"]')).to_contain_text("13")
    assert Harness.objects.get(project=owner.project).preset == "harbor-runner"
