"""Membership in a real browser (DEBUG on, as `make up` serves it): inviting a new and an
existing address answers the same, each accepts through the link, roles change, members are
removed, and the last owner stays."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from belvedir.models import Membership, Role

pytestmark = pytest.mark.browser

LINK = re.compile(r"https?://\S+/invitations/[\w-]+/")


@pytest.fixture(autouse=True)
def make_up_settings(settings, live_server):
    settings.DEBUG = True
    settings.BELVEDIR_BASE_URL = live_server.url


def _invite(page, email: str, role: str = "Member") -> tuple[str, str]:
    """Invite on the organization page; returns the inviter's message and the link."""
    page.goto("/settings/organization/")
    page.fill("#id_invite-email", email)
    page.select_option("#id_invite-role", label=role)
    page.click("#invite-form button[type=submit]")
    notice = page.locator("#new-invitation")
    expect(notice).to_contain_text(email)
    text = notice.inner_text()
    return text, LINK.search(text).group(0)


def _log_in(page, email: str, password: str = "correct-horse-9", next_url: str = "") -> None:
    page.goto("/login/" + (f"?next={next_url}" if next_url else ""))
    page.fill("#id_username", email)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def test_inviting_a_new_and_an_existing_address_answers_the_same_and_both_join(
    signed_in_page, browser, live_server, owner
):
    get_user_model().objects.create_user(
        username="known@example.com", email="known@example.com", password="correct-horse-9"
    )
    page = signed_in_page
    known_text, known_link = _invite(page, "known@example.com")
    new_text, new_link = _invite(page, "new@example.com")

    def neutral(text, email):
        return LINK.sub("LINK", text).replace(email, "EMAIL")

    assert neutral(known_text, "known@example.com") == neutral(new_text, "new@example.com")
    expect(page.locator("#invitations")).to_contain_text("known@example.com")
    expect(page.locator("header.top nav")).to_be_visible()  # the page stayed whole

    # The new address signs up through the link and lands in the organization.
    visitor = browser.new_context(base_url=live_server.url).new_page()
    visitor.goto(new_link)
    expect(visitor.locator("h1")).to_have_text("Join Acme")
    visitor.fill("#id_password", "a-good-password-9")
    visitor.click("text=Create account and join")
    visitor.wait_for_url(lambda url: "/invitations/" not in url)
    expect(visitor.locator("select[name=project] option:checked")).to_have_text("Acme / Default")
    new_user = get_user_model().objects.get(email="new@example.com")
    assert Membership.objects.get(user=new_user).organization == owner.org
    visitor.context.close()

    # The existing address logs in from the link and accepts.
    existing = browser.new_context(base_url=live_server.url).new_page()
    existing.goto(known_link)
    existing.click("text=Log in to accept")
    existing.fill("#id_username", "known@example.com")
    existing.fill("#id_password", "correct-horse-9")
    existing.click("button[type=submit]")
    existing.wait_for_url("**/invitations/**")
    existing.click("text=Accept and join Acme")
    existing.wait_for_url(lambda url: "/invitations/" not in url)
    expect(existing.locator(".messages")).to_contain_text("You joined Acme")
    assert Membership.objects.filter(user__email="known@example.com", organization=owner.org)
    existing.context.close()


def test_an_owner_changes_a_role_and_removes_a_member(signed_in_page, member):
    page = signed_in_page
    page.goto("/settings/organization/")
    row = page.locator('tr[data-member="member@example.com"]')
    row.locator("select[name=role]").select_option("admin")
    row.locator("text=Change").click()
    expect(page.locator("#membership .messages")).to_contain_text(
        "member@example.com is now admin."
    )
    assert Membership.objects.get(user=member.user).role == Role.ADMIN

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator('tr[data-member="member@example.com"] >> text=Remove').click()
    expect(page.locator('tr[data-member="member@example.com"]')).to_have_count(0)
    expect(page.locator("#membership .messages")).to_contain_text("was removed")
    assert not Membership.objects.filter(user=member.user).exists()


def test_the_last_owner_cannot_be_removed(signed_in_page, owner):
    page = signed_in_page
    page.goto("/settings/organization/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator('tr[data-member="owner@example.com"] >> text=Leave').click()
    expect(page.locator("#page-error")).to_contain_text("at least one owner")
    expect(page.locator('tr[data-member="owner@example.com"]')).to_have_count(1)
    expect(page.locator("header.top nav")).to_be_visible()
    assert Membership.objects.get(user=owner.user).role == Role.OWNER


def test_a_read_only_member_sees_the_organization_forms_disabled(page, readonly):
    _log_in(page, "ro@example.com")
    page.goto("/settings/organization/")
    expect(page.locator("#id_invite-email")).to_be_disabled()
    expect(page.locator('tr[data-member="owner@example.com"] select[name=role]')).to_be_disabled()
    expect(page.locator("text=Remove")).to_have_count(0)


def test_creating_a_project_keeps_the_current_one_and_offers_the_switch(signed_in_page, owner):
    page = signed_in_page
    page.goto("/settings/organization/")
    page.fill("#id_project-name", "Research")
    page.click("text=Create project")
    expect(page.locator("#new-project")).to_contain_text("You are still in Default")
    expect(page.locator("select[name=project] option:checked")).to_have_text("Acme / Default")
    page.click("text=Switch to Research")
    expect(page.locator("select[name=project] option:checked")).to_have_text("Acme / Research")
