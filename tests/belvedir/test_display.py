"""What every page shares: score precision, counted nouns, where-you-are links, error pages."""

import pytest
from django.template import Context, Template
from django.test import RequestFactory

from belvedir.templatetags.belvedir_tags import counted, score


def render(source: str, **context) -> str:
    return Template(source).render(Context(context))


def test_a_score_shows_with_three_decimals_everywhere():
    assert score(0.85) == "0.850"
    assert score(1) == "1.000"
    assert score(0.123456) == "0.123"
    assert score(0.0) == "0.000"


def test_a_missing_score_shows_as_a_dash_not_zero():
    assert score(None) == "—"
    assert score("") == "—"
    assert score(True) == "—"


def test_the_score_filter_is_available_in_every_template_without_loading():
    assert render("{{ s|score }}", s=0.5) == "0.500"


def test_a_count_of_one_is_singular_and_any_other_count_plural():
    assert counted(1, "task") == "1 task"
    assert counted(0, "task") == "0 tasks"
    assert counted(2, "task") == "2 tasks"
    assert counted(1, "LLM call") == "1 LLM call"
    assert counted(3, "entry,entries") == "3 entries"
    assert counted(1, "entry,entries") == "1 entry"
    assert render('{{ n|counted:"span" }}', n=1) == "1 span"


def test_the_link_to_the_current_section_is_marked_aria_current():
    request = RequestFactory().get("/runs/run_abc/")
    source = '<a{% aria_current "/runs/" %}>runs</a><a{% aria_current "/traces/" %}>traces</a>'
    html = Template(source).render(Context({"request": request}))
    assert html == '<a aria-current="page">runs</a><a>traces</a>'


def test_an_exact_path_marks_only_that_page():
    source = '<a{% aria_current "=/traces/" %}>sessions</a>'
    here = Template(source).render(Context({"request": RequestFactory().get("/traces/")}))
    below = Template(source).render(Context({"request": RequestFactory().get("/traces/tasks/")}))
    assert here == '<a aria-current="page">sessions</a>' and below == "<a>sessions</a>"


@pytest.mark.django_db
def test_the_navigation_marks_the_section_the_user_is_in(owner):
    html = owner.web.get("/runs/").content.decode()
    assert 'href="/runs/" aria-current="page">My Benchmarks<' in html
    assert 'href="/harnesses/">Harnesses<' in html


@pytest.mark.django_db
def test_the_trace_tabs_mark_the_open_tab(owner):
    html = owner.web.get("/traces/tasks/").content.decode()
    assert 'href="/traces/tasks/" aria-current="page">Tasks<' in html
    assert 'href="/traces/">Sessions<' in html


@pytest.mark.django_db
def test_every_page_links_the_favicon(client):
    html = client.get("/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
    assert client.get("/static/favicon.svg").status_code == 200


@pytest.mark.django_db
def test_a_failed_login_names_the_email_not_the_username(client):
    response = client.post("/login/", {"username": "nobody@example.com", "password": "wrong-1"})
    html = response.content.decode()
    assert "Please enter a correct email and password." in html
    assert "correct username" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
def test_an_unknown_page_answers_the_styled_404_without_a_url_list(owner, settings, debug):
    settings.DEBUG = debug
    response = owner.web.get("/no/such/page/")
    html = response.content.decode()
    assert response.status_code == 404
    assert 'id="not-found"' in html and "Page not found" in html
    assert "Belvedir Benchmarks" in html and 'href="/harnesses/"' in html  # the site's header
    assert "URLconf" not in html and "admin/" not in html and "api/v1/" not in html


@pytest.mark.django_db
def test_a_missing_object_answers_the_styled_404_with_debug_on(owner, settings):
    settings.DEBUG = True
    response = owner.web.get("/runs/run_nope/")
    assert response.status_code == 404
    assert "URLconf" not in response.content.decode()


@pytest.mark.django_db
def test_an_unknown_api_url_is_not_turned_into_an_html_page(owner, settings):
    settings.DEBUG = True
    response = owner.api.get("/api/v1/runs/run_nope")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")


@pytest.mark.django_db
def test_the_500_page_is_in_the_site_s_style_and_renders_without_a_request_context(rf):
    from belvedir.views import server_error

    response = server_error(rf.get("/harnesses/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert 'id="server-error"' in html and "/static/belvedir.css" in html


def test_messages_count_with_the_same_words_as_pages():
    from belvedir.text import counted as counted_text

    assert counted_text(1, "run") == "1 run" and counted_text(4, "run") == "4 runs"


@pytest.mark.django_db
def test_an_htmx_request_to_an_unknown_url_gets_the_message_for_the_page_error_box(owner, settings):
    settings.DEBUG = True
    response = owner.web.get("/no/such/fragment/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 404 and response["HX-Retarget"] == "#page-error"
    assert "Nothing is at this address." in html and "<html" not in html and "URLconf" not in html


def test_the_score_text_the_cli_prints_is_the_pages_score():
    from belvedir.text import score_text

    assert score_text(0.85) == score(0.85) == "0.850"
    assert score_text(None) == score(None) == "—"
