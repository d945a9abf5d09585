"""Playwright against Debian's chromium and pytest-django's live server."""

import pytest

from tests.helpers.chromium import policed_page


@pytest.fixture
def page(browser, live_server):
    page = policed_page(browser, live_server.url, timeout_ms=10_000)
    yield page
    page.context.close()
    assert page.csp_violations == [], "the Content-Security-Policy blocked something"


@pytest.fixture
def signed_in_page(page, owner):
    """The owner fixture's user, logged in through the login page."""
    page.goto("/login/")
    page.fill("#id_username", "owner@example.com")
    page.fill("#id_password", "correct-horse-9")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)  # the home page
    page.goto("/harnesses/")
    return page


@pytest.fixture
def debug_page(settings, signed_in_page):
    """The signed-in page with DEBUG on, as `make up` (scripts/up.sh) serves every new user."""
    settings.DEBUG = True
    return signed_in_page
