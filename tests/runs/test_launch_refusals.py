"""Launch refusals end to end: the caps answer 429 on the API and inline in the HTMX dialog."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.mark.docker
def test_the_htmx_launch_dialog_shows_the_in_flight_cap_inline_with_429(
    owner, make_harness, settings
):
    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = 1
    harness = make_harness()
    Run.objects.create(project=owner.project, harness=harness, harness_name="contract")

    response = owner.web.post(
        f"/runs/launch/{harness.pk}/", {"attempts": 1, "grading": "pass@1"}, **HTMX
    )

    assert response.status_code == 429
    html = response.content.decode()
    assert html.lstrip().startswith('<form method="post"') and 'id="launch-form"' in html
    assert "already has 1 run in flight (the limit is 1)" in html
    assert Run.objects.count() == 1


@pytest.mark.docker
def test_the_daily_cap_answers_429_with_a_code_and_when_to_retry(owner, make_harness, settings):
    settings.BELVEDIR_RUNS_PER_DAY_CAP = 2
    harness = make_harness()
    now = timezone.now()
    for age in (timedelta(hours=23), timedelta(hours=1)):
        run = Run.objects.create(
            project=owner.project, harness=harness, harness_name="contract", status="succeeded"
        )
        Run.objects.filter(pk=run.pk).update(created_at=now - age)

    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")

    assert response.status_code == 429
    assert response.json()["code"] == "cap_daily"
    # the older run ages out of the 24 hours in about an hour
    assert 3500 <= int(response["Retry-After"]) <= 3600


def test_a_read_only_members_htmx_launch_gets_the_refusal_in_the_page_error_box(
    owner, readonly, make_harness
):
    harness = make_harness()

    response = readonly.web.post(
        f"/runs/launch/{harness.pk}/", {"attempts": 1, "grading": "pass@1"}, **HTMX
    )

    assert response.status_code == 403
    assert response["HX-Retarget"] == "#page-error"
    assert "Read-only members cannot change anything." in response.content.decode()
    assert Run.objects.count() == 0


def test_an_outsider_gets_a_404_page_and_a_404_api_answer_with_its_code(owner, outsider, make_run):
    run = make_run()

    page = outsider.web.get(f"/runs/{run.pk}/")
    assert page.status_code == 404
    assert "Not found." in page.content.decode()

    api = outsider.api.get(f"/api/v1/runs/{run.pk}")
    assert api.status_code == 404
    assert api.json() == {"detail": "Not found.", "code": "not_found"}
