"""The run page of a managed Harbor run in Chromium: its task sandboxes appear, run and stop
live, while the driver (here, the test) starts and stops them through the API."""

import pytest
from playwright.sync_api import expect

from tests.helpers.task_sandboxes import (
    context_tar,
    fresh_dockerfile,
    managed_client,
    remove_task_images,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


def test_task_sandboxes_show_up_and_stop_live_on_the_run_page(
    signed_in_page, owner, sandbox_settings
):
    page = signed_in_page
    sandbox_settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = 0.05
    run, client = managed_client(
        owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, env={"HARBOR_CONCURRENCY": "3"}
    )
    page.goto(f"/runs/{run.pk}/")
    summary = page.locator("#task-sandbox-summary")
    expect(summary).to_contain_text("at most 3 at once")
    expect(summary).to_contain_text("$0.05 per task-sandbox minute")
    expect(summary).to_contain_text("0 running, 0 in all")

    created = client.create("capital-of-france", context_tar(fresh_dockerfile()))
    assert created.status == 201, created.body
    sandbox = created.json()
    try:
        row = page.locator(f'tr[data-task-sandbox="{sandbox["id"]}"]')
        expect(row).to_contain_text("capital-of-france")
        expect(row.locator(".badge")).to_have_text("running")
        expect(summary).to_contain_text("1 running, 1 in all")

        assert client.stop(sandbox["id"]).status == 200

        expect(row.locator(".badge")).to_have_text("stopped")
        expect(row).to_contain_text("$0.05")  # one started minute
        expect(summary).to_contain_text("0 running, 1 in all, $0.05 charged")
    finally:
        remove_task_images({sandbox["image"]})
