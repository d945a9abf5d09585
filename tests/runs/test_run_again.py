"""Run again: the run's harness launched anew with the run's settings and stored keys."""

import pytest

from belvedir.errors import Invalid
from runs import contract, services
from runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.docker]

SETTINGS = {
    "model": "openai/gpt-4.1-mini",
    "model_api_base": "https://llm.example.com/v1",
    "model_api_key": "sk-model-secret-1234",
    "judge_model": "judge/one",
    "judge_api_base": "https://judge.example.com/v1",
    "judge_api_key": "sk-judge-secret-5678",
    "attempts": 3,
    "grading": "mean",
}
SHARED = [
    "harness_id",
    "model",
    "model_api_base",
    "judge_model",
    "judge_api_base",
    "attempts",
    "grading",
]


@pytest.fixture
def first(launch):
    run = launch(**SETTINGS)
    Run.objects.filter(pk=run.pk).update(status="failed")
    run.refresh_from_db()
    return run


def test_run_again_launches_a_new_run_with_the_same_settings_and_keys(
    owner, first, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        again = services.run_relaunch(run=first, created_by=owner.user)
    assert again.pk != first.pk and again.status == "queued" and len(enqueued) == 1
    assert [getattr(again, f) for f in SHARED] == [getattr(first, f) for f in SHARED]
    secrets = contract.run_model_secrets(again)
    assert secrets["model_api_key"] == "sk-model-secret-1234"
    assert secrets["judge_api_key"] == "sk-judge-secret-5678"
    assert secrets["run_key"] != contract.run_model_secrets(first)["run_key"]


def test_run_again_is_refused_once_the_harness_is_deleted(first):
    first.harness.delete()
    first.refresh_from_db()
    with pytest.raises(Invalid, match="harness was deleted") as refused:
        services.run_relaunch(run=first)
    assert refused.value.field == "harness"
    assert Run.objects.count() == 1


def test_run_again_counts_against_the_caps_like_any_launch(owner, first, settings):
    from belvedir.errors import LimitReached

    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = 1
    Run.objects.filter(pk=first.pk).update(status="running")
    with pytest.raises(LimitReached):
        services.run_relaunch(run=first, created_by=owner.user)
    assert Run.objects.count() == 1


# --- the page action -----------------------------------------------------------------------------


def test_the_run_again_button_posts_and_lands_on_the_new_run(owner, first):
    assert "Run again</button>" in owner.web.get(f"/runs/{first.pk}/").content.decode()
    response = owner.web.post(f"/runs/{first.pk}/again/")
    again = Run.objects.exclude(pk=first.pk).get()
    assert response.status_code == 303 and response["Location"] == f"/runs/{again.pk}/"
    assert again.model == first.model and again.created_by == owner.user


def test_run_again_with_htmx_redirects_the_browser_to_the_new_run(owner, first):
    response = owner.web.post(f"/runs/{first.pk}/again/", HTTP_HX_REQUEST="true")
    again = Run.objects.exclude(pk=first.pk).get()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/runs/{again.pk}/"


def test_a_refused_run_again_with_htmx_says_why_in_the_page_error_box(owner, first, settings):
    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = 1
    Run.objects.filter(pk=first.pk).update(status="running")
    response = owner.web.post(f"/runs/{first.pk}/again/", HTTP_HX_REQUEST="true")
    assert response.status_code == 429 and response["HX-Retarget"] == "#page-error"
    assert "in flight (the limit is 1)" in response.content.decode()


def test_run_again_is_for_writers_of_the_runs_organization_only(owner, readonly, outsider, first):
    page = readonly.web.get(f"/runs/{first.pk}/").content.decode()
    assert "Run again</button>" not in page
    assert readonly.web.post(f"/runs/{first.pk}/again/").status_code == 403
    assert outsider.web.post(f"/runs/{first.pk}/again/").status_code == 404
    assert owner.web.get(f"/runs/{first.pk}/again/").status_code == 405
    assert Run.objects.count() == 1
