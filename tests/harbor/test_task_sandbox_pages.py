"""Where people see task sandboxes and their price: the run page (harbor's partial, pulled in
with hx-get and live while the run runs), the Billing page's pricing, the admin."""

from django.contrib.admin.utils import quote
from django.utils import timezone

from harbor.models import TaskSandbox
from runs.models import Run, Status
from tests.helpers.task_sandboxes import make_managed_run

HX = {"HTTP_HX_REQUEST": "true"}


def partial_url(run):
    return f"/harbor/runs/{run.pk}/task-sandboxes/"


def boxes(run):
    now = timezone.now()
    TaskSandbox.objects.create(
        run=run, name="capital", status="running", image="belvedir-task:abc", started_at=now
    )
    TaskSandbox.objects.create(
        run=run,
        name="refund",
        status="stopped",
        image="belvedir-task:abc",
        cached=True,
        started_at=now,
        stopped_at=now,
        charged=True,
        charged_micros=250_000,
    )


def test_the_run_page_lists_a_managed_runs_task_sandboxes_with_status_and_price(owner, settings):
    settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = 0.25
    run, _ = make_managed_run(owner, env={"HARBOR_CONCURRENCY": "2"})
    boxes(run)

    page = owner.web.get(partial_url(run), **HX).content.decode()

    assert 'id="run-task-sandboxes"' in page
    assert "at most 2 at once" in page and "$0.25 per task-sandbox minute" in page
    assert "1 running, 2 in all, $0.25 charged" in page
    assert "capital" in page and "refund" in page and "(cached)" in page


def test_the_run_pages_live_fragment_carries_the_task_sandboxes_while_it_runs(owner):
    run, _ = make_managed_run(owner)
    boxes(run)

    fragment = owner.web.get(partial_url(run), **HX).content.decode()

    assert fragment.strip().startswith('<section id="run-task-sandboxes"')
    assert 'hx-trigger="every 1s"' in fragment
    assert 'id="task-sandbox-table"' in fragment and "time is free on this platform" in fragment


def test_the_run_page_pulls_harbors_task_sandbox_partial_in_with_a_link_fallback(owner):
    run, _ = make_managed_run(owner)
    boxes(run)

    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    live = owner.web.get(f"/runs/{run.pk}/", **HX).content.decode()

    url = partial_url(run)
    assert f'<div id="run-task-sandboxes" hx-get="{url}" hx-trigger="load"' in page
    assert f'<a class="muted" href="{url}">Task sandboxes of this run</a>' in page
    assert 'id="task-sandbox-table"' not in page  # the rows are harbor's, not the run page's
    assert 'id="run-task-sandboxes"' not in live  # the run page's live part never replaces it


def test_the_task_sandbox_partial_stops_asking_again_once_the_run_ended(owner):
    run, _ = make_managed_run(owner)
    boxes(run)
    Run.objects.filter(pk=run.pk).update(status=Status.SUCCEEDED)

    fragment = owner.web.get(partial_url(run), **HX).content.decode()

    assert 'id="task-sandbox-table"' in fragment and "hx-trigger" not in fragment


def test_without_scripts_the_task_sandbox_link_is_a_page_of_its_own(owner):
    run, _ = make_managed_run(owner)
    boxes(run)

    page = owner.web.get(partial_url(run)).content.decode()

    assert "<html" in page and f'href="/runs/{run.pk}/"' in page
    assert 'id="task-sandbox-table"' in page and "capital" in page


def test_the_task_sandbox_partial_is_hidden_from_outsiders_and_shown_to_readers(
    owner, outsider, readonly
):
    run, _ = make_managed_run(owner)
    boxes(run)

    assert outsider.web.get(partial_url(run), **HX).status_code == 404
    shown = readonly.web.get(partial_url(run), **HX)
    assert shown.status_code == 200 and 'id="task-sandbox-table"' in shown.content.decode()


def test_a_run_that_is_not_managed_harbor_shows_no_task_sandboxes(owner, make_run):
    run = make_run(status=Status.RUNNING)

    assert 'id="run-task-sandboxes"' not in owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-task-sandboxes"' not in owner.web.get(partial_url(run), **HX).content.decode()


def test_the_billing_pages_pricing_names_the_task_sandbox_minute(owner, settings):
    settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = 0.1

    page = owner.web.get("/settings/organization/billing/").content.decode()

    assert "task sandboxes (one container per task) cost $0.10 per minute each" in page


def test_operators_see_task_sandboxes_in_the_admin(owner, superuser):
    run, _ = make_managed_run(owner)
    boxes(run)
    box = TaskSandbox.objects.get(name="refund")

    listing = superuser.get("/admin/harbor/tasksandbox/?status=stopped")
    detail = superuser.get(f"/admin/harbor/tasksandbox/{quote(box.pk)}/change/")

    assert listing.status_code == 200 and "refund" in listing.content.decode()
    assert "capital" not in listing.content.decode()
    assert detail.status_code == 200 and "$0.25" in listing.content.decode()
