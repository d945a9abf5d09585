"""Harness pages: list, New Harness (catalog cards + HTMX form), detail/edit, delete."""

import re

import pytest

from harnesses.catalog import PRESETS
from harnesses.models import Harness

HX = {"HTTP_HX_REQUEST": "true"}

FORM = {
    "name": "From the page",
    "repo_url": "https://github.com/example/harness.git",
    "ref": "",
    "install_command": "pip install -e .",
    "run_command": "python run.py",
    "env": "MODEL=openai/gpt-4.1-mini\n# a comment\n\nHARBOR_N_TASKS=3",
    "compute": "cpu",
    "gpu_type": "",
    "tasks": "",
    "preset": "",
}


def _field_errors(html: str, field: str) -> str:
    match = re.search(rf'<ul class="errorlist" data-field="{field}">(.*?)</ul>', html, re.S)
    return match.group(1) if match else ""


def _is_fragment(html: str) -> bool:
    return "<html" not in html and "<header" not in html and 'id="harness-form"' in html


# --- list -------------------------------------------------------------------


def test_list_shows_the_current_projects_harnesses(owner, harness):
    response = owner.web.get("/harnesses/")
    assert response.status_code == 200
    assert f'href="/harnesses/{harness.pk}/"' in response.content.decode()


def test_list_hides_another_organizations_harnesses(outsider, harness):
    response = outsider.web.get("/harnesses/")
    assert response.status_code == 200
    assert harness.pk not in response.content.decode()


def test_read_only_member_sees_the_list_without_a_new_harness_button(readonly, harness):
    html = readonly.web.get("/harnesses/").content.decode()
    assert harness.name in html and "New harness" not in html


def test_signed_out_visitors_are_sent_to_log_in(client, harness):
    for url in ["/harnesses/", "/harnesses/new/", f"/harnesses/{harness.pk}/"]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")


# --- New Harness ------------------------------------------------------------


def test_new_harness_page_shows_every_catalog_card_grouped(owner):
    html = owner.web.get("/harnesses/new/").content.decode()
    for group in ["Suites", "Belvedir Runners", "Agent scaffolds", "GPU-served"]:
        assert f"<h2>{group}</h2>" in html
    for preset in PRESETS:
        assert f'data-preset="{preset.slug}"' in html, preset.slug


@pytest.mark.parametrize("preset", [p for p in PRESETS if not p.available], ids=lambda p: p.slug)
def test_not_yet_available_cards_are_disabled_and_not_links(owner, preset):
    html = owner.web.get("/harnesses/new/").content.decode()
    card = re.search(rf'<(\w+)[^>]*data-preset="{preset.slug}"[^>]*>', html).group(0)
    assert card.startswith("<div") and 'aria-disabled="true"' in card and "href" not in card


@pytest.mark.parametrize("preset", [p for p in PRESETS if p.available], ids=lambda p: p.slug)
def test_available_cards_link_to_the_prefilled_form_with_an_htmx_fallback(owner, preset):
    html = owner.web.get("/harnesses/new/").content.decode()
    card = re.search(rf'<(\w+)[^>]*data-preset="{preset.slug}"[^>]*>', html).group(0)
    assert f'href="?preset={preset.slug}"' in card and f'hx-get="?preset={preset.slug}"' in card


def test_clicking_a_card_with_htmx_returns_only_the_prefilled_form(owner):
    response = owner.web.get("/harnesses/new/?preset=openclaw", **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert _is_fragment(html)
    assert 'value="OpenClaw"' in html
    assert "HARBOR_AGENT=openclaw" in html
    assert "HARBOR_N_TASKS" not in html  # every task of the list runs: no cap prefilled
    assert 'name="preset" value="openclaw"' in html


def test_opening_a_card_without_htmx_renders_the_whole_page_prefilled(owner):
    html = owner.web.get("/harnesses/new/?preset=swe-bench-verified").content.decode()
    assert "<header" in html and 'value="SWE-bench Verified"' in html
    assert "HARBOR_AGENT=terminus-2" in html


def test_opening_an_unavailable_card_says_so_naming_it(owner):
    response = owner.web.get("/harnesses/new/?preset=mastra", **HX)
    assert response.status_code == 400
    assert (
        "Mastra" in response.content.decode() and "not yet available" in response.content.decode()
    )


def test_owner_creates_a_harness_from_the_form_and_lands_on_its_page(owner):
    response = owner.web.post("/harnesses/new/", FORM)
    harness = Harness.objects.get(name="From the page")
    assert response.status_code == 303 and response["Location"] == f"/harnesses/{harness.pk}/"
    assert harness.project == owner.project and harness.created_by == owner.user
    assert harness.env == {"MODEL": "openai/gpt-4.1-mini", "HARBOR_N_TASKS": "3"}


def test_creating_with_htmx_redirects_the_browser_to_the_new_harness(owner):
    response = owner.web.post("/harnesses/new/", FORM, **HX)
    harness = Harness.objects.get(name="From the page")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/harnesses/{harness.pk}/"


def test_a_card_submitted_with_a_cleared_field_keeps_it_cleared(owner):
    form = {**FORM, "preset": "runner", "name": "No tasks", "tasks": "", "install_command": ""}
    assert owner.web.post("/harnesses/new/", form).status_code == 303
    harness = Harness.objects.get(name="No tasks")
    assert harness.preset == "runner" and harness.tasks == "" and harness.install_command == ""


@pytest.mark.parametrize(
    "change,field,words",
    [
        ({"name": ""}, "name", "required"),
        ({"repo_url": "http://example.com/h.git"}, "repo_url", "git URL"),
        ({"run_command": ""}, "run_command", "required"),
        ({"env": "PATH=/x"}, "env", "PATH"),
        ({"env": "http_proxy=http://proxy:3128"}, "env", "http_proxy"),
        ({"env": "not a pair"}, "env", "KEY=VALUE"),
        ({"compute": "tpu"}, "compute", "tpu"),
        ({"tasks": "a" * (512 * 1024 + 1)}, "tasks", "512 KB"),
        ({"ref": "a..b"}, "ref", "ref"),
        ({"preset": "mastra"}, "preset", "Mastra"),
    ],
)
def test_bad_input_on_the_new_form_is_400_with_the_error_inline_under_its_field(
    owner, change, field, words
):
    response = owner.web.post("/harnesses/new/", {**FORM, **change}, **HX)
    assert response.status_code == 400
    html = response.content.decode()
    assert _is_fragment(html)
    errors = _field_errors(html, field) if field != "preset" else html
    assert words in errors, html
    assert not Harness.objects.exists()


def test_bad_input_without_htmx_rerenders_the_whole_page_with_400(owner):
    response = owner.web.post("/harnesses/new/", {**FORM, "env": "HOME=/root"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "<header" in html and "HOME" in _field_errors(html, "env")
    assert 'value="From the page"' in html  # what was typed is kept


def test_read_only_member_cannot_create_a_harness_from_the_page(readonly):
    assert readonly.web.post("/harnesses/new/", FORM).status_code == 403
    assert readonly.web.post("/harnesses/new/", FORM, **HX).status_code == 403
    assert not Harness.objects.exists()


# --- detail / edit ----------------------------------------------------------


def test_owner_sees_the_harness_page_with_its_settings(owner, harness):
    html = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert "<h1" in html and "Smoke" in html and "MODEL=openai/gpt-4.1-mini" in html
    assert "Delete harness" in html


def test_owner_edits_the_harness_from_its_page(owner, harness):
    form = {**FORM, "name": "Smoke v2", "env": "MODEL=x"}
    response = owner.web.post(f"/harnesses/{harness.pk}/", form)
    assert response.status_code == 303
    harness.refresh_from_db()
    assert harness.name == "Smoke v2" and harness.env == {"MODEL": "x"}


def test_editing_with_htmx_returns_only_the_form_marked_saved(owner, harness):
    response = owner.web.post(f"/harnesses/{harness.pk}/", {**FORM, "name": "Smoke v3"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert _is_fragment(html) and "Saved." in html and 'value="Smoke v3"' in html


def test_bad_edit_with_htmx_is_400_with_the_error_inline_and_nothing_saved(owner, harness):
    response = owner.web.post(
        f"/harnesses/{harness.pk}/", {**FORM, "env": "LD_PRELOAD=/x.so"}, **HX
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert _is_fragment(html) and "LD_PRELOAD" in _field_errors(html, "env")
    harness.refresh_from_db()
    assert harness.env == {"MODEL": "openai/gpt-4.1-mini"}


def test_read_only_member_sees_the_harness_but_cannot_save_or_delete(readonly, harness):
    html = readonly.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert "Smoke" in html and ">Save<" not in html and "Delete harness" not in html
    assert readonly.web.post(f"/harnesses/{harness.pk}/", {**FORM, "name": "x"}).status_code == 403
    harness.refresh_from_db()
    assert harness.name == "Smoke"


def test_outsider_gets_404_for_another_organizations_harness_page(outsider, harness):
    assert outsider.web.get(f"/harnesses/{harness.pk}/").status_code == 404
    assert outsider.web.get(f"/harnesses/{harness.pk}/", **HX).status_code == 404
    assert outsider.web.post(f"/harnesses/{harness.pk}/", FORM).status_code == 404


# --- delete -----------------------------------------------------------------


def test_owner_deletes_a_harness_from_its_page(owner, harness):
    response = owner.web.post(f"/harnesses/{harness.pk}/delete/")
    assert response.status_code == 303 and response["Location"] == "/harnesses/"
    assert not Harness.objects.filter(pk=harness.pk).exists()


def test_delete_needs_a_post(owner, harness):
    assert owner.web.get(f"/harnesses/{harness.pk}/delete/").status_code == 405
    assert Harness.objects.filter(pk=harness.pk).exists()


def test_read_only_member_cannot_delete_a_harness(readonly, harness):
    assert readonly.web.post(f"/harnesses/{harness.pk}/delete/").status_code == 403
    assert Harness.objects.filter(pk=harness.pk).exists()


def test_outsider_cannot_delete_another_organizations_harness(outsider, harness):
    assert outsider.web.post(f"/harnesses/{harness.pk}/delete/").status_code == 404
    assert Harness.objects.filter(pk=harness.pk).exists()
