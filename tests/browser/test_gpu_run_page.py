"""A queued GPU run's page says which worker it waits for, and, live, which device it got."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs import services
from runs.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_gpu_run_waits_for_its_type_then_shows_the_device_it_got(signed_in_page, owner, harness):
    page = signed_in_page
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        gpu_type="A10G",
        enqueued_at=timezone.now(),
        harness_snapshot={"name": harness.name, "run_command": harness.run_command},
    )
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("#run-status")).to_have_text("queued, position 1")
    expect(page.locator("#run-waiting")).to_have_text("waiting for an A10G worker")

    # A worker with a free A10G claims it: the page (polling its live part) follows.
    assert services.run_claim(run_id=run.pk, worker="gpu-host:1", gpu_device="gpu-host/0")
    expect(page.locator("#run-status")).to_have_text("running")
    expect(page.locator("#run-waiting")).to_have_count(0)
    expect(page.locator("#run-gpu")).to_have_text("A10G GPU gpu-host/0")
