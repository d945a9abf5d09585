"""A refused form answers inline beside its field and keeps the page, under `make up`'s DEBUG.

`make up` serves with DEBUG on, where django-htmx's debug script replaces the whole document
with any 400/403/404/500 answer; these refusals must still land in their form.
"""

import pytest
from playwright.sync_api import expect

from belvedir.models import ApiKey
from harnesses.models import Harness
from runs.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def expect_page_intact(page) -> None:
    """The site's navigation and its stylesheet are still there: the page was not replaced."""
    expect(page.locator("header.top nav").get_by_role("link", name="Harnesses")).to_be_visible()
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).display") == "flex"
    assert page.evaluate("document.querySelectorAll('head link[rel=stylesheet]').length") == 1


def post_answer(page, path: str):
    return page.expect_response(lambda r: path in r.url and r.request.method == "POST")


def test_an_empty_key_name_is_refused_inline_and_a_reload_never_creates_a_key_twice(
    debug_page, owner
):
    page = debug_page
    page.goto("/settings/project/")
    keys = page.locator("#keys")
    with post_answer(page, "/settings/project/") as answer:
        keys.get_by_role("button", name="Create key").click()
    assert answer.value.status == 400
    expect(keys.locator(".errorlist[data-field=name]")).to_contain_text("This field is required")
    expect_page_intact(page)

    # The form still works through htmx afterwards.
    keys.get_by_label("Key name").fill("CI")
    with post_answer(page, "/settings/project/") as answer:
        keys.get_by_role("button", name="Create key").click()
    assert answer.value.status == 200
    expect(page.locator("#new-key code")).to_contain_text("bv_live_")
    page.reload()
    expect(page.locator("#keys table")).to_contain_text("CI")
    assert ApiKey.objects.filter(project=owner.project, name="CI").count() == 1


def test_a_refused_env_key_on_a_new_harness_is_shown_beside_the_env_field(debug_page, owner):
    page = debug_page
    page.goto("/harnesses/new/")
    form = page.locator("#harness-form")
    form.get_by_label("Name").fill("bad env")
    form.get_by_label("Git repo URL").fill("https://github.com/example/harness.git")
    form.get_by_label("Run command").fill("python run.py")
    form.get_by_label("Env vars").fill("PATH=/tmp/evil")
    with post_answer(page, "/harnesses/new/") as answer:
        form.get_by_role("button", name="Create harness").click()
    assert answer.value.status == 400
    expect(page.locator("#field-env .errorlist")).to_contain_text("PATH changes how the sandbox")
    expect_page_intact(page)
    assert not Harness.objects.filter(name="bad env").exists()

    # Fixed, the same form creates the harness and the browser lands on its page.
    form.get_by_label("Env vars").fill("FOO=bar")
    form.get_by_role("button", name="Create harness").click()
    page.wait_for_url("**/harnesses/har_*/")
    assert Harness.objects.filter(name="bad env").count() == 1


def test_saving_a_harness_with_ld_preload_is_refused_beside_the_env_field(debug_page, harness):
    page = debug_page
    page.goto(f"/harnesses/{harness.pk}/")
    form = page.locator("#harness-form")
    form.get_by_label("Env vars").fill("LD_PRELOAD=/tmp/evil.so")
    with post_answer(page, f"/harnesses/{harness.pk}/") as answer:
        form.get_by_role("button", name="Save").click()
    assert answer.value.status == 400
    expect(page.locator("#field-env .errorlist")).to_contain_text("LD_PRELOAD changes how")
    expect_page_intact(page)
    harness.refresh_from_db()
    assert "LD_PRELOAD" not in harness.env

    form.get_by_label("Env vars").fill("MODEL=openai/gpt-4.1")
    form.get_by_role("button", name="Save").click()
    expect(form.get_by_role("status")).to_have_text("Saved.")
    harness.refresh_from_db()
    assert harness.env == {"MODEL": "openai/gpt-4.1"}


@pytest.mark.docker
def test_a_launch_refused_because_the_repo_does_not_answer_shows_in_the_dialog(
    debug_page, owner, tmp_path
):
    from harnesses.services import harness_create

    harness = harness_create(
        project=owner.project,
        name="gone",
        repo_url=f"file://{tmp_path}/no-such-repo",
        run_command="python run.py",
        created_by=owner.user,
    )
    page = debug_page
    page.goto(f"/harnesses/{harness.pk}/")
    page.get_by_role("link", name="New benchmark").click()
    dialog = page.locator("#launch-dialog")
    with post_answer(page, f"/runs/launch/{harness.pk}/") as answer:
        dialog.get_by_role("button", name="Launch").click()
    assert answer.value.status == 400
    expect(dialog.locator("#launch-form")).to_contain_text("cannot be read")
    expect(dialog.get_by_text("checking the repo…")).to_be_hidden()
    expect_page_intact(page)
    assert not Run.objects.exists()


@pytest.mark.docker
def test_a_launch_that_never_reaches_the_server_says_so_and_clears_the_indicator(
    debug_page, owner, make_harness
):
    harness = make_harness(name="offline")
    page = debug_page
    page.goto(f"/harnesses/{harness.pk}/")
    page.get_by_role("link", name="New benchmark").click()
    dialog = page.locator("#launch-dialog")
    page.route(
        f"**/runs/launch/{harness.pk}/",
        lambda route: route.abort() if route.request.method == "POST" else route.continue_(),
    )
    dialog.get_by_role("button", name="Launch").click()
    expect(dialog.get_by_role("alert")).to_contain_text("could not be reached")
    expect(dialog.get_by_text("checking the repo…")).to_be_hidden()
    expect_page_intact(page)

    # Once the server answers again, the same form launches through htmx.
    page.unroute(f"**/runs/launch/{harness.pk}/")
    # A double click launches once (htmx sends one request of a form at a time).
    dialog.get_by_role("button", name="Launch").dblclick()
    page.wait_for_url("**/runs/run_*/")
    assert Run.objects.filter(harness=harness).count() == 1
    expect(page.get_by_role("alert")).to_have_count(0)
