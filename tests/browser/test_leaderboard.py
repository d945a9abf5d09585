"""The leaderboard where people look: pulled into the harness page, Latest/Best swapped in place,
and a row's comparison with the leader one click away."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from harnesses.models import Harness
from tests.browser.test_dashboard_pictures import scored_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def scored(owner, harness, model, score, hours_ago, half=0.05):
    bar = {"score_ci_low": score - half, "score_ci_high": score + half, "n_tasks": 50}
    run = scored_run(owner, harness, model, score, 0, score_stderr=half / 1.96, **bar)
    run.finished_at = timezone.now() - timedelta(hours=hours_ago)
    run.save(update_fields=["finished_at"])
    return run


def test_the_harness_page_ranks_its_models_and_switches_to_their_best_run(signed_in_page, owner):
    harness = Harness.objects.create(
        project=owner.project, name="ranked", repo_url="x", run_command="x"
    )
    scored(owner, harness, "m/a", 0.95, 5)  # m/a's best, older
    a = scored(owner, harness, "m/a", 0.50, 1)
    b = scored(owner, harness, "m/b", 0.80, 2)
    page = signed_in_page
    page.goto(f"/harnesses/{harness.pk}/")
    rows = page.locator("#leaderboard-table tbody tr")
    expect(rows).to_have_count(2)  # pulled in by hx-get
    expect(rows.nth(0)).to_have_attribute("data-model", "m/b")
    expect(rows.nth(1)).to_contain_text("0.500 ± 0.026")

    page.locator("#leaderboard-best").click()
    expect(page.locator("#leaderboard-best")).to_have_attribute("aria-current", "true")
    expect(rows.nth(0)).to_have_attribute("data-model", "m/a")
    expect(rows.nth(0)).to_contain_text("0.950")
    assert page.url.endswith(f"/harnesses/{harness.pk}/")  # swapped in place

    page.locator("#leaderboard-latest").click()
    expect(rows.nth(0)).to_have_attribute("data-model", "m/b")
    rows.nth(1).get_by_text("compare with the leader").click()
    page.wait_for_url(f"**/runs/compare/?run={b.pk}&run={a.pk}")
    expect(page.locator("body")).to_contain_text("A is")
