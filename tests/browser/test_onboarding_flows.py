"""Onboarding in a real browser (DEBUG on, as `make up` serves it): the landing page, the next
steps ticked as they are done, the key page's snippets with the platform's URL, the catalog
card highlighted."""

import re

import pytest
from playwright.sync_api import expect

from harnesses import services as harness_services

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def make_up_settings(settings, live_server):
    settings.DEBUG = True
    settings.BELVEDIR_BASE_URL = live_server.url


def test_a_signed_out_visitor_sees_what_the_product_is_before_the_login_form(page):
    page.goto("/")
    expect(page.locator("#landing h1")).to_contain_text("Benchmark the agents")
    expect(page.locator("#landing")).to_contain_text("isolated sandbox")
    page.click("#landing >> text=Log in")
    expect(page.locator("#id_username")).to_be_visible()
    expect(page.locator("#about")).to_contain_text("What is Belvedir?")


def test_a_new_organization_sees_the_next_steps_ticked_as_they_are_done(page):
    page.goto("/signup/")
    page.fill("#id_email", "grace@example.com")
    page.fill("#id_password", "compiler-9-long")
    page.fill("#id_organization", "Hopper")
    page.click("button[type=submit]")
    steps = page.locator("#onboarding li.step")
    expect(steps).to_have_count(4)
    expect(steps.locator("a")).to_have_text(
        [
            "Create an API key",
            "Add a harness from the catalog",
            "Launch a run",
            "Send traces",
        ]
    )
    expect(page.locator("#onboarding li.step.done")).to_have_count(0)
    expect(page.locator("#dashboard")).to_contain_text("Nothing running.")

    page.click("text=Create an API key")
    page.fill("input[name=key-name]", "laptop")
    page.click("text=Create key")
    expect(page.locator("#new-key code")).to_have_text(re.compile(r"^bv_live_"))

    from belvedir.models import Project

    project = Project.objects.get(organization__name="Hopper")
    harness_services.harness_create(
        project=project,
        name="Mine",
        repo_url="https://github.com/example/h.git",
        run_command="python run.py",
    )
    page.goto("/")
    expect(page.locator('#onboarding li.step.done[data-step="key"]')).to_have_count(1)
    expect(page.locator('#onboarding li.step.done[data-step="harness"]')).to_have_count(1)
    expect(page.locator('#onboarding li.step[data-step="run"]:not(.done)')).to_have_count(1)
    expect(page.locator("header.top nav")).to_be_visible()


def test_the_key_page_snippets_use_the_platforms_url_and_the_new_key(signed_in_page, live_server):
    page = signed_in_page
    page.goto("/settings/project/")
    expect(page.locator("#snippet-curl")).to_contain_text(f"{live_server.url}/api/v1/runs")
    expect(page.locator("#snippet-sdk")).to_contain_text(f'base_url="{live_server.url}"')
    page.fill("input[name=key-name]", "CI")
    page.click("text=Create key")
    key = page.locator("#new-key code").inner_text()
    expect(page.locator("#snippet-cli")).to_contain_text(f"export BELVEDIR_API_KEY={key}")
    expect(page.locator("#snippet-cli")).to_contain_text(f"export BELVEDIR_URL={live_server.url}")
    expect(page.locator("#snippet-curl")).to_contain_text(f"Bearer {key}")


def test_the_catalog_card_picked_is_highlighted_and_gpu_warns(signed_in_page, settings):
    settings.BELVEDIR_GPU_TYPES = {}
    page = signed_in_page
    page.goto("/harnesses/new/")
    page.click("[data-preset=openclaw]")
    expect(page.locator("#id_name")).to_have_value("OpenClaw")
    expect(page.locator("a.card.preset.selected")).to_have_count(1)
    expect(page.locator("a.card.preset.selected")).to_have_attribute("data-preset", "openclaw")
    expect(page.locator("#help-tasks")).to_contain_text("BELVEDIR_TASKS_FILE")
    expect(page.locator("#gpu-warning")).to_be_hidden()
    page.select_option("#id_compute", "gpu")
    expect(page.locator("#gpu-warning")).to_be_visible()
    expect(page.locator("#gpu-warning")).to_contain_text("BELVEDIR_GPU_TYPES")
