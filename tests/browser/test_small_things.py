"""Small things users notice, in a real browser with DEBUG on (as `make up` serves them): the
active navigation and tab, the favicon, "1 task" and the launch dialog's model suggestions."""

import pytest
from playwright.sync_api import expect

from runs.models import Run
from traces.models import TaskGroup

pytestmark = pytest.mark.browser


def test_navigation_tabs_favicon_plurals_and_the_launch_dialogs_suggestions(
    debug_page, owner, harness
):
    page = debug_page
    nav = page.locator("header.top nav")

    # The nav marks where the user is, and only there.
    page.goto("/harnesses/")
    expect(nav.locator('[aria-current="page"]')).to_have_text(["Harnesses"])
    page.goto("/runs/")
    expect(nav.locator('[aria-current="page"]')).to_have_text(["My Benchmarks"])

    # The traces tabs: Sessions on /traces/, Task groups on a group's page, Traces in the nav.
    tabs = page.locator('nav.tabs[aria-label="Traces"]')
    page.goto("/traces/")
    expect(tabs.locator('[aria-current="page"]')).to_have_text(["Sessions"])
    expect(nav.locator('[aria-current="page"]')).to_have_text(["Traces"])
    group = TaskGroup.objects.create(
        project=owner.project, name="Summarise", normalized_name="summarise", task_count=1
    )
    page.goto(f"/traces/task-groups/{group.pk}/")
    expect(tabs.locator('[aria-current="page"]')).to_have_text(["Task groups"])
    expect(page.locator("main, body").first).to_contain_text("1 task · 0 success")
    expect(page.locator("body")).not_to_contain_text("1 tasks")

    # The favicon link resolves to an SVG image.
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert href
    favicon = page.request.get(href)
    assert favicon.status == 200
    assert favicon.headers["content-type"].startswith("image/svg+xml")

    # The launch dialog offers the model ids used before (once each) and placeholders.
    for model in ["openai/gpt-4.1-mini", "qwen/qwen3-coder", "openai/gpt-4.1-mini"]:
        Run.objects.create(project=owner.project, harness=harness, harness_name="x", model=model)
    page.goto(f"/runs/launch/{harness.pk}/")
    model_input = page.locator("#launch-form input[name=model]")
    list_id = model_input.get_attribute("list")
    assert list_id
    options = page.locator(f"datalist#{list_id} option")
    assert sorted(options.evaluate_all("els => els.map(e => e.value)")) == [
        "openai/gpt-4.1-mini",
        "qwen/qwen3-coder",
    ]
    expect(model_input).to_have_attribute(
        "placeholder", "e.g. openai/gpt-4.1-mini or anthropic/claude-sonnet-5"
    )
    for name in ["model_api_base", "model_api_key"]:
        placeholder = page.locator(f"#launch-form [name={name}]").get_attribute("placeholder")
        assert placeholder and placeholder.startswith("blank:"), name
