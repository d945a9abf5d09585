"""The main pages under the Content-Security-Policy in Chromium: nothing is blocked (the page
fixture fails a test on any violation Chromium reports, tests/browser/conftest.py), and what
used to be inline handlers still works from belvedir.js: the launch dialog opens and closes,
a delete asks first, the project switcher switches, htmx filters and loads fragments, the span
bars sit on their timeline, Swagger UI draws the API, the admin works."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from belvedir import services as core_services
from harnesses.models import Harness
from tests.helpers.seed import seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def visit(page, path: str) -> None:
    response = page.goto(path)
    assert response.status == 200, path
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy, path
    page.wait_for_load_state("load")


def test_the_main_pages_work_with_nothing_blocked_by_the_policy(signed_in_page, owner):
    page = signed_in_page
    seeded = seed(owner, runs=5, big_session_spans=8)
    harness = seeded.harnesses[0]
    core_services.project_create(organization=owner.org, name="Research")

    for path in [
        "/",
        "/harnesses/",
        "/environments/",
        "/models/",
        "/traces/",
        "/traces/task-groups/",
        "/settings/project/",
        "/settings/organization/",
        "/settings/organization/billing/",
        f"/runs/{seeded.runs[0].pk}/",
        f"/runs/{seeded.runs[3].pk}/",  # running: it polls
    ]:
        visit(page, path)
    assert page.csp_violations == []

    # The launch dialog opens from its link (no inline onclick), loads its form, and closes.
    visit(page, f"/harnesses/{harness.pk}/")
    here = page.url
    page.get_by_role("link", name="New benchmark").click()
    dialog = page.locator("#launch-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#launch-form input[name=model]")).to_be_visible()
    assert page.url == here  # the link was not followed
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()

    # A delete asks first (data-confirm): no keeps the harness, yes deletes it.
    asked = []
    page.once("dialog", lambda d: asked.append(d.message) or d.dismiss())
    page.get_by_role("button", name="Delete harness").click()
    expect(page.locator("h1")).to_have_text(harness.name)
    page.once("dialog", lambda d: asked.append(d.message) or d.accept())
    page.get_by_role("button", name="Delete harness").click()
    page.wait_for_url("**/harnesses/")
    assert asked == ["Delete this harness?", "Delete this harness?"]
    assert not Harness.objects.filter(pk=harness.pk).exists()

    # My Benchmarks' filter swaps the table in (htmx, JSON hx-vals, no eval).
    visit(page, "/runs/")
    page.locator("input[name=model]").fill("qwen/qwen3-32b")
    page.locator("input[name=model]").dispatch_event("change")
    page.wait_for_url("**model=qwen**")
    expect(page.locator("#run-table")).to_contain_text("qwen/qwen3-32b")
    expect(page.locator("#run-table")).not_to_contain_text("gpt-4.1-mini")

    # The span tree: bars placed by their SVG attributes; Details load by htmx.
    visit(page, f"/traces/sessions/{seeded.big_session.pk}/")
    places = page.evaluate(
        """() => [...document.querySelectorAll('#span-tree .waterfall')].map((lane) => {
          const l = lane.getBoundingClientRect(), b = lane.querySelector('.bar').getBoundingClientRect();
          return [(b.left - l.left) / l.width, b.width / l.width];
        })"""
    )
    assert len(places) == 8 and all(width > 0 for _, width in places)
    assert len({round(start, 2) for start, _ in places}) > 1  # not all stacked at the start
    page.locator("#span-tree details.span-more > summary").first.click()
    expect(page.locator("#span-tree .span-body").first).not_to_contain_text("Open the span")

    # The project switcher sends its form on change (no inline onchange).
    page.select_option("select[name=project]", label="Acme / Research")
    expect(page.locator("select[name=project] option:checked")).to_have_text("Acme / Research")

    # Swagger UI draws the API from its own script file.
    visit(page, "/api/docs/")
    expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
    assert page.csp_violations == []

    # The watch itself: an inline script and an inline style slipped in are blocked and said.
    visit(page, "/harnesses/")
    ran = page.evaluate(
        """() => {
          window.ran = false;
          const s = document.createElement("script");
          s.textContent = "window.ran = true";
          document.body.appendChild(s);
          document.querySelector("h1").setAttribute("style", "color: red");
          return window.ran;
        }"""
    )
    assert ran is False
    expect(page.locator("h1")).not_to_have_css("color", "rgb(255, 0, 0)")
    page.wait_for_function("() => true")
    assert any("script-src" in v for v in page.csp_violations), page.csp_violations
    assert any("style-src" in v for v in page.csp_violations), page.csp_violations
    page.csp_violations.clear()


def test_the_admin_works_with_nothing_blocked_by_the_policy(page, owner):
    get_user_model().objects.create_superuser(
        username="operator@example.com", email="operator@example.com", password="correct-horse-9"
    )
    seeded = seed(owner, runs=3, big_session_spans=4)
    visit(page, "/admin/login/")
    page.fill("#id_username", "operator@example.com")
    page.fill("#id_password", "correct-horse-9")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    for path in [
        "/admin/runs/run/",
        f"/admin/runs/run/{seeded.runs[0].pk}/change/",
        "/admin/harnesses/harness/",
        f"/admin/harnesses/harness/{seeded.harnesses[0].pk}/change/",
        "/admin/belvedir/organization/",
        "/admin/auth/user/add/",
    ]:
        visit(page, path)
    # The changelist's action bar (admin's own scripts) still counts what is picked.
    visit(page, "/admin/runs/run/")
    page.locator("#action-toggle").check()
    expect(page.locator(".action-counter")).to_contain_text("3 of 3 selected")
    assert page.csp_violations == []
