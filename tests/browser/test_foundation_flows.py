"""The foundation in a real browser: sign up, a key shown once, a harness from a catalog card."""

import re

import pytest
from playwright.sync_api import expect

from belvedir.models import ApiKey, Membership
from harnesses.models import Harness
from tests.helpers.tenants import pay_as_you_go

pytestmark = pytest.mark.browser


def test_a_visitor_signs_up_and_lands_in_their_default_project(page):
    page.goto("/signup/")
    page.fill("#id_email", "ada@example.com")
    page.fill("#id_password", "analytical-engine")
    page.fill("#id_organization", "Lovelace Labs")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/signup/" not in url)
    expect(page.locator("#onboarding")).to_be_visible()  # the home page's next steps
    expect(page.locator("select[name=project] option:checked")).to_have_text(
        "Lovelace Labs / Default"
    )
    expect(page.locator(".messages")).to_contain_text("Welcome")
    membership = Membership.objects.get(user__email="ada@example.com")
    assert membership.role == "owner" and membership.organization.name == "Lovelace Labs"


def test_a_new_key_is_shown_once_and_gone_after_a_reload(signed_in_page, owner):
    page = signed_in_page
    page.click("text=Project settings")
    page.fill("input[name=key-name]", "CI")
    page.click("text=Create key")
    secret = page.locator("#new-key code")
    expect(secret).to_have_text(re.compile(r"^bv_live_\w{20,}$"))
    plaintext = secret.inner_text()
    assert page.url.endswith("/settings/project/")  # swapped in by htmx, no navigation
    key = ApiKey.objects.get(name="CI")
    assert plaintext.startswith("bv_live_" + key.prefix)

    page.reload()
    expect(page.locator("#new-key")).to_have_count(0)
    assert plaintext not in page.content()
    expect(page.locator("#keys")).to_contain_text(f"bv_live_{key.prefix}")


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_harness_is_created_from_a_catalog_card(signed_in_page, owner):
    page = signed_in_page
    page.click("text=New harness")
    page.wait_for_url("**/harnesses/new/")
    page.click("[data-preset=openclaw]")
    name = page.locator("#id_name")
    expect(name).to_have_value("OpenClaw")  # prefilled by htmx
    expect(page.locator("#id_env")).to_have_value(re.compile("HARBOR_AGENT=openclaw"))
    expect(page.locator("#id_repo_url")).not_to_have_value("")
    assert "preset=openclaw" in page.url  # the card's URL is pushed, so reload keeps it
    name.fill("OpenClaw nightly")
    page.locator("#id_env").fill("HARBOR_AGENT=openclaw\nHARBOR_N_TASKS=2")
    page.click("text=Create harness")
    page.wait_for_url(re.compile(r"/harnesses/har_\w+/$"))
    expect(page.locator("h1")).to_have_text("OpenClaw nightly")
    harness = Harness.objects.get(project=owner.project)
    assert harness.name == "OpenClaw nightly" and harness.preset == "openclaw"
    assert harness.env == {"HARBOR_AGENT": "openclaw", "HARBOR_N_TASKS": "2"}


def test_a_harbor_card_without_credits_is_refused_above_the_fields_then_saved_with_payg(
    signed_in_page, owner
):
    page = signed_in_page
    page.goto("/harnesses/new/?preset=harbor-runner")
    page.click("text=Create harness")
    refusal = page.locator("ul.errorlist.nonfield")
    expect(refusal).to_contain_text("has no credits (its balance is $0.00)")
    expect(refusal).to_contain_text("pay as you go is off")
    assert not Harness.objects.exists()

    pay_as_you_go(owner.org)
    page.click("text=Create harness")
    page.wait_for_url(re.compile(r"/harnesses/har_\w+/$"))
    assert Harness.objects.get(project=owner.project).preset == "harbor-runner"


def test_not_yet_available_cards_are_shown_disabled(signed_in_page):
    page = signed_in_page
    page.goto("/harnesses/new/")
    for slug in ["lm-eval", "mt-bench", "hermes-agent", "prime-agent", "qm", "mastra"]:
        card = page.locator(f"[data-preset={slug}]")
        expect(card).to_have_attribute("aria-disabled", "true")
        expect(card).to_contain_text("Not yet available")
        assert card.evaluate("el => el.tagName") == "DIV"
        assert card.get_attribute("href") is None and card.get_attribute("hx-get") is None
    before = page.locator("#id_name").input_value()
    page.locator("[data-preset=mastra]").click(force=True)
    page.wait_for_timeout(300)
    assert page.locator("#id_name").input_value() == before  # clicking it does nothing
    assert "mastra" not in page.url


def test_an_env_key_like_path_is_refused_inline_naming_it(signed_in_page, owner):
    page = signed_in_page
    page.goto("/harnesses/new/?preset=pi")
    page.locator("#id_env").fill("HARBOR_AGENT=pi\nPATH=/x")
    page.click("text=Create harness")
    error = page.locator('ul.errorlist[data-field="env"]')
    expect(error).to_contain_text("PATH")
    assert "/harnesses/new/" in page.url
    expect(page.locator("#id_env")).to_have_value(re.compile("PATH=/x"))  # what was typed is kept
    expect(page.locator("header.top")).to_have_count(
        1
    )  # the fragment replaced the form, not the page
    assert not Harness.objects.exists()


def test_the_new_harness_page_screenshot(signed_in_page):
    page = signed_in_page
    page.goto("/harnesses/new/")
    page.click("[data-preset=swe-bench-verified]")
    expect(page.locator("#id_name")).to_have_value("SWE-bench Verified")
    page.screenshot(path="/tmp/new-harness.png", full_page=True)
