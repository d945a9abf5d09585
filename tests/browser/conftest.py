"""Playwright against Debian's chromium and pytest-django's live server."""

import os

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# (fixtures, assertions) are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("BELVEDIR_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser():
    from playwright import sync_api as playwright_api

    if not os.path.exists(CHROMIUM):  # make test installs it: a missing browser is a failure
        pytest.fail(f"no chromium at {CHROMIUM}; run scripts/prepare-machine.sh")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# Chromium reports what the Content-Security-Policy blocks on the console ("Refused to execute
# inline script because it violates the following Content Security Policy directive…"); the
# listener reports the same as an event, with the directive, for blocks the console words
# differently.
CSP_LISTENER = """document.addEventListener("securitypolicyviolation", (e) => console.error(
  `Content Security Policy violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`
  + ` in ${e.sourceFile || document.location.href}:${e.lineNumber}`));"""


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    # What the policy blocked on this page so far; a test fails at its end on any.
    page.csp_violations = []
    page.on(
        "console",
        lambda message: (
            "Content Security Policy" in message.text
            and page.csp_violations.append(f"{page.url}: {message.text}")
        ),
    )
    yield page
    context.close()
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
