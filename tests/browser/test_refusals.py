"""A refused launch shows its message in the dialog: htmx swaps in the 429, not only 400s."""

import pytest
from playwright.sync_api import expect

from runs.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.docker]


def test_a_launch_past_the_in_flight_cap_shows_the_refusal_in_the_dialog(
    signed_in_page,
    owner,
    make_harness,
    settings,
):
    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = 1
    page = signed_in_page
    harness = make_harness(name="capped")
    Run.objects.create(project=owner.project, harness=harness, harness_name="capped")
    page.goto(f"/harnesses/{harness.pk}/")
    page.click("text=New benchmark")
    dialog = page.locator("#launch-dialog")
    # The dialog pulls the launch form in with a GET; the answer that matters is the POST's.
    with page.expect_response(
        lambda r: "/runs/launch/" in r.url and r.request.method == "POST"
    ) as answer:
        dialog.locator("button[type=submit]").click()

    assert answer.value.status == 429
    expect(dialog).to_contain_text("already has 1 run in flight (the limit is 1)")
    assert Run.objects.count() == 1
