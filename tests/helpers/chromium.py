"""Debian's chromium as the browser tests launch it (tests/browser/conftest.py, and the
end-to-end test of `make up`, tests/test_make_up.py)."""

import os

CHROMIUM = os.environ.get("BELVEDIR_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Chromium reports what the Content-Security-Policy blocks on the console ("Refused to execute
# inline script because it violates the following Content Security Policy directive…"); the
# listener reports the same as an event, with the directive, for blocks the console words
# differently.
CSP_LISTENER = """document.addEventListener("securitypolicyviolation", (e) => console.error(
  `Content Security Policy violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`
  + ` in ${e.sourceFile || document.location.href}:${e.lineNumber}`));"""


def policed_page(browser, base_url: str, *, timeout_ms: int):
    """A new page of its own context at 1280x900 on `base_url`; `page.csp_violations` lists
    what the Content-Security-Policy blocked on it so far (a test fails at its end on any)."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(timeout_ms)
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    page.csp_violations = []
    page.on(
        "console",
        lambda message: (
            "Content Security Policy" in message.text
            and page.csp_violations.append(f"{page.url}: {message.text}")
        ),
    )
    return page
