"""The rough edges a new user met (issue 22), in Chromium at a phone's width (375 px) and a
laptop's (1366 px): the header fits (a Menu at phone width, the nav on one line on a laptop),
the log in colour, a Runner's attempts as a table, each chart label once, money one way and
the admin's app names in words."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Run
from tests.runs.test_log_colours import COLOURED
from tests.runs.test_run_display import RUNNER_RESULTS

pytestmark = pytest.mark.browser

PHONE, LAPTOP = 375, 1366

# Every box in the header a user needs: where it starts and ends, and whether it shows.
HEADER_BOXES = """() => [...document.querySelectorAll(
  "header.top .brand, header.top .menu-toggle, header.top nav a, header.top select,"
  + " header.top .who, header.top .logout button"
)].map((e) => {
  const r = e.getBoundingClientRect();
  return {what: e.textContent.trim().slice(0, 30) || e.tagName, left: r.left, right: r.right,
          top: r.top, bottom: r.bottom, shown: r.width > 0 && r.height > 0};
})"""


def overflow(page) -> int:
    """How far the page reaches past the right edge of the viewport, in pixels."""
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def outside(boxes: list[dict], width: int) -> list[str]:
    return [b["what"] for b in boxes if b["shown"] and (b["left"] < 0 or b["right"] > width)]


def test_on_a_phone_the_header_folds_into_a_menu_that_holds_log_out(signed_in_page):
    page = signed_in_page
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.goto("/runs/")
    header = page.locator("header.top")
    menu = page.get_by_role("button", name="Menu")

    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(header.locator("nav")).to_be_hidden()
    assert outside(page.evaluate(HEADER_BOXES), PHONE) == []
    assert page.evaluate("document.querySelector('header.top').scrollWidth") <= PHONE

    menu.click()

    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(header.get_by_role("link", name="My Benchmarks")).to_be_visible()
    boxes = page.evaluate(HEADER_BOXES)
    assert all(b["shown"] for b in boxes), boxes
    assert outside(boxes, PHONE) == []
    assert page.evaluate("document.querySelector('header.top').scrollWidth") <= PHONE
    log_out = header.get_by_role("button", name="Log out")
    expect(log_out).to_be_in_viewport()
    log_out.click()
    expect(page.get_by_role("link", name="Log in")).to_be_visible()


def test_on_a_laptop_the_whole_header_shows_and_the_nav_stays_on_one_line(signed_in_page, owner):
    owner.project.name = "Evaluation of the long-context retrieval suite"
    owner.project.save(update_fields=["name"])
    page = signed_in_page
    page.set_viewport_size({"width": LAPTOP, "height": 800})
    page.goto("/runs/")

    expect(page.locator("header.top .menu-toggle")).to_be_hidden()
    boxes = page.evaluate(HEADER_BOXES)
    assert all(b["shown"] for b in boxes if b["what"] != "Menu"), boxes
    assert outside(boxes, LAPTOP) == []
    links = [b for b in boxes if b["what"] in {"Harnesses", "My Benchmarks", "Organization"}]
    assert len(links) == 3 and len({b["top"] for b in links}) == 1  # one line
    log_out = page.locator("header.top").get_by_role("button", name="Log out")
    expect(log_out).to_be_in_viewport()
    assert overflow(page) == 0
    who = page.locator("header.top .who span").first  # the address shows whole, not clipped
    assert who.evaluate("e => e.scrollWidth <= e.clientWidth")


@pytest.fixture
def rough_run(owner, harness) -> Run:
    """A finished covered Runner run: a coloured log, per-task attempts, a sub-cent spend."""
    return Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        model="m/one",
        status="succeeded",
        score=0.5,
        results=RUNNER_RESULTS,
        log_tail=COLOURED,
        log_size=len(COLOURED),
        covered=True,
        covered_cap_micros=2_000_000,
        covered_spent_micros=4_567,
        finished_at=timezone.now(),
    )


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_the_run_page_shows_colours_an_attempts_table_and_money_one_way(
    signed_in_page, rough_run, width
):
    page = signed_in_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/runs/{rough_run.pk}/")

    log = page.locator("#run-log")
    expect(log).to_contain_text("PASSED tests/test_a.py")
    failed = log.locator("span.ansi-fg-1", has_text="FAILED")
    expect(failed).to_be_visible()
    assert failed.evaluate("e => getComputedStyle(e).color") == "rgb(255, 123, 114)"
    assert "[0m" not in log.inner_text() and "[31m" not in log.inner_text()

    attempts = page.locator("#results-tasks table.nested").first
    expect(attempts).to_be_visible()
    expect(attempts.locator("th")).to_have_text(["attempt", "score", "passed", "error", "answer"])
    expect(attempts.locator("tbody tr").first).to_contain_text("the judge timed out")
    expect(page.locator("#results-tasks")).not_to_contain_text('"attempt"')

    expect(page.locator("#run-covered-spend")).to_contain_text("$0.004567 of $2.00")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download").click()
    assert "\x1b" not in open(download.value.path(), encoding="utf-8").read()


# The x axis's labels as Chart.js drew them (a null label is one the chart leaves out).
TICK_LABELS = """() => Chart.getChart(document.querySelector("#runs-chart canvas"))
  .scales.x.ticks.map((t) => t.label).filter((label) => label)"""


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_each_time_on_the_score_charts_axis_shows_once(signed_in_page, owner, harness, width):
    now = timezone.now()
    for n, seconds in enumerate([0, 20, 45, 70, 95]):  # runs a few seconds apart, as at first
        Run.objects.create(
            project=owner.project,
            harness=harness,
            harness_name=harness.name,
            model="m/one",
            status="succeeded",
            score=n / 5,
            finished_at=now - timedelta(seconds=100 - seconds),
        )
    page = signed_in_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/runs/")
    expect(page.locator("#runs-chart canvas")).to_be_visible()

    labels = page.evaluate(TICK_LABELS)

    assert labels and len(labels) == len(set(labels)), labels


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_the_admin_names_its_apps_in_words(page, db, width):
    get_user_model().objects.create_superuser(
        username="operator@example.com", email="operator@example.com", password="correct-horse-9"
    )
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/admin/login/")
    page.fill("#id_username", "operator@example.com")
    page.fill("#id_password", "correct-horse-9")
    page.click("input[type=submit]")

    captions = page.locator("#content-main caption a")
    expect(captions.first).to_be_visible()
    names = captions.all_inner_texts()
    assert "MODEL REGISTRY" in names and "HARNESSES AND ENVIRONMENTS" in names, names
    assert not [name for name in names if "_" in name], names
