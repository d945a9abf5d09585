"""The harness page pulls its recent runs and its launch form from the runs app (HTMX partials)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def _fragment(client, harness_id: str):
    return client.get("/runs/", {"harness": harness_id, "fragment": "harness-runs"}, **HX)


def test_the_harness_page_pulls_its_recent_runs_on_load_with_a_link_fallback(owner, make_harness):
    harness = make_harness(name="pulled")
    html = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()

    (placeholder,) = re.findall(r'<div id="harness-runs"[^>]*>', html)
    assert f'hx-get="/runs/?harness={harness.pk}&amp;fragment=harness-runs"' in placeholder
    assert 'hx-trigger="load"' in placeholder
    assert f'<a href="/runs/?harness={harness.pk}">' in html


def test_the_harness_page_pulls_the_launch_form_into_its_dialog(owner, make_harness):
    harness = make_harness(name="launchable")
    html = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()

    dialog = html[html.index('<dialog id="launch-dialog">') :]
    dialog = dialog[: dialog.index("</dialog>")]
    assert f'hx-get="/runs/launch/{harness.pk}/" hx-trigger="load"' in dialog
    assert f'<a href="/runs/launch/{harness.pk}/">' in dialog

    form = owner.web.get(f"/runs/launch/{harness.pk}/", **HX).content.decode()
    assert form.lstrip().startswith("<form") and 'id="launch-form"' in form
    assert "<html" not in form


def test_the_recent_runs_fragment_lists_the_harness_s_ten_latest_runs(
    owner, make_harness, make_run
):
    harness = make_harness(name="busy")
    other = make_harness(name="other")
    now = timezone.now()
    runs = [
        make_run(harness=harness, model=f"m-{i}", created_at=now - timedelta(minutes=i))
        for i in range(11)
    ]
    make_run(harness=other, model="not-this-harness")

    response = _fragment(owner.web, harness.pk)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="harness-runs">') and "<html" not in html
    assert re.findall(r'class="mono">(run_\w+)</a>', html) == [r.pk for r in runs[:10]]
    assert "not-this-harness" not in html
    assert f'<a href="/runs/?harness={harness.pk}">All runs of this harness' in html


def test_the_recent_runs_fragment_says_when_there_are_none(owner, make_harness):
    harness = make_harness(name="fresh")
    assert "No runs yet." in _fragment(owner.web, harness.pk).content.decode()


def test_a_read_only_member_reads_the_recent_runs_fragment(readonly, make_harness, make_run):
    harness = make_harness(name="shared")
    run = make_run(harness=harness)
    response = _fragment(readonly.web, harness.pk)
    assert response.status_code == 200 and run.pk in response.content.decode()


def test_an_outsider_gets_404_for_another_organizations_recent_runs(
    outsider, make_harness, make_run
):
    harness = make_harness(name="private")
    make_run(harness=harness)
    assert _fragment(outsider.web, harness.pk).status_code == 404


def test_the_recent_runs_fragment_without_a_harness_is_404(owner):
    assert owner.web.get("/runs/", {"fragment": "harness-runs"}, **HX).status_code == 404
