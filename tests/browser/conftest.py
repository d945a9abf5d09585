"""Playwright against Debian's chromium and pytest-django's live server."""

import os

import pytest

from tests.helpers.chromium import CHROMIUM, CHROMIUM_ARGS, policed_page

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# (fixtures, assertions) are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    from playwright import sync_api as playwright_api

    if not os.path.exists(CHROMIUM):  # make test installs it: a missing browser is a failure
        pytest.fail(f"no chromium at {CHROMIUM}; run scripts/prepare-machine.sh")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


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
