"""Every page carries a Content-Security-Policy that allows scripts and styles only from our own
static files (no inline script without the request's nonce, no inline style, no eval), no
plugins and no framing; the templates hold no inline script, handler or style that it would
block; an operator adds a CDN's or an analytics host's sources with BELVEDIR_CSP_EXTRA.

The browser half (no violation reported while the pages are used) is
tests/browser/test_content_security_policy.py."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.template import engines
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from belvedir.members import invitation_create
from belvedir.models import Role
from harnesses import environments
from tests.helpers.seed import seed

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def policy_of(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"{_path(response)} answered without a Content-Security-Policy"
    directives = {}
    for part in header.split(";"):
        name, *sources = part.split()
        directives[name] = sources
    return directives


def _path(response) -> str:
    return getattr(response, "request", {}).get("PATH_INFO", "?")


def assert_strict(response) -> None:
    path = _path(response)
    policy = policy_of(response)
    script = policy.get("script-src", [])
    assert "'self'" in script, path
    unsafe = {"'unsafe-inline'", "'unsafe-eval'", "*", "http:", "https:", "data:"} & set(script)
    assert not unsafe, f"{path}: script-src allows {unsafe}"
    assert "'unsafe-inline'" not in policy.get("style-src", []), path
    assert policy.get("default-src") == ["'self'"], path
    assert policy.get("object-src") == ["'none'"], path
    assert policy.get("frame-ancestors") == ["'none'"], path
    assert policy.get("base-uri") == ["'self'"], path
    assert policy.get("form-action") == ["'self'"], path


def _page_patterns(patterns, prefix=""):
    """Every URL pattern outside the API, the git endpoints and the admin (walked apart)."""
    for p in patterns:
        route = prefix + str(p.pattern)
        if route.startswith(("api/v1/", "git/", "admin/")):
            continue
        if isinstance(p, URLResolver):
            yield from _page_patterns(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            yield route


def _fill(route: str, ids: dict[str, str]) -> str:
    def one(match):
        name = match.group(2)
        assert name in ids, f"no id for <{name}> in {route}: add one to the test's pages"
        return str(ids[name])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", one, route)


@pytest.fixture
def pages(owner, make_fine_tuned):
    """Rows behind every page: seeded runs, sessions, spans and task groups, an environment,
    a fine-tuned model and an invitation; the ids each URL parameter takes."""
    seeded = seed(owner, runs=5, big_session_spans=8)
    environment = environments.environment_create(
        project=owner.project, name="Arithmetic", tasks="What is 2+2?\n", created_by=owner.user
    )
    model = make_fine_tuned()
    invitation, token = invitation_create(
        organization=owner.org, email="new@example.com", role=Role.MEMBER, invited_by=owner.user
    )
    session = seeded.big_session
    return {
        "harness_id": seeded.harnesses[0].pk,
        "run_id": seeded.runs[0].pk,
        "session_id": session.pk,
        "span_pk": session.spans.first().pk,
        "group_id": session.tasks.first().group.pk,
        "environment_id": environment.pk,
        "generation_id": "gen_none",
        "model_id": model.pk,
        "key_id": owner.project.api_keys.first().pk,
        "member_id": owner.org.memberships.first().pk,
        "invitation_id": invitation.pk,
        "token": token,
        "name": "harness-contract",  # /docs/<name>.md
    }


def test_every_page_a_user_visits_carries_a_strict_policy(owner, pages):
    answered = {}
    for route in _page_patterns(get_resolver().url_patterns):
        path = _fill(route, pages)
        response = owner.web.get(path)
        assert response.status_code < 500, path
        assert_strict(response)
        answered[path] = response.status_code
    # Not only refusals: the pages people look at answered in full.
    shown = {path for path, status in answered.items() if status == 200}
    for path in [
        "/",
        "/harnesses/",
        "/harnesses/new/",
        f"/harnesses/{pages['harness_id']}/",
        "/runs/",
        f"/runs/{pages['run_id']}/",
        f"/traces/sessions/{pages['session_id']}/",
        "/traces/task-groups/",
        f"/environments/{pages['environment_id']}/",
        "/models/",
        f"/models/{pages['model_id']}/",
        "/settings/project/",
        "/settings/organization/",
        "/settings/organization/billing/",
        "/api/docs/",
    ]:
        assert path in shown, f"{path} answered {answered.get(path)}"


def test_the_pages_before_signing_in_carry_a_strict_policy(db, pages):
    anonymous = Client()
    for path in ["/", "/login/", "/signup/", f"/invitations/{pages['token']}/", "/admin/login/"]:
        response = anonymous.get(path)
        assert response.status_code == 200, path
        assert_strict(response)
    assert_strict(anonymous.get("/no/such/page/"))  # the 404 page too
    refused = anonymous.post("/login/", {"username": "owner@example.com", "password": "wrong"})
    assert_strict(refused)


def test_every_admin_page_an_operator_visits_carries_a_strict_policy(superuser, owner, pages):
    assert_strict(superuser.get(reverse("admin:index")))
    for model in admin.site._registry:
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        response = superuser.get(reverse(f"{name}_changelist"))
        assert response.status_code == 200, name
        assert_strict(response)
        row = model.objects.first()
        if row is not None:
            response = superuser.get(reverse(f"{name}_change", args=[row.pk]))
            assert response.status_code == 200, name
            assert_strict(response)


def test_the_api_docs_script_is_a_file_of_its_own_not_inline(owner):
    page = owner.web.get("/api/docs/").content.decode()
    assert_strict(owner.web.get("/api/docs/"))
    assert not _inline_scripts(page) and "<style" not in page
    script = re.search(r'<script src="(/api/docs/\?script=[^"]*)"', page)
    assert script, "the Swagger UI start-up script is not served as a file"
    answer = owner.web.get(script.group(1).replace("&amp;", "&"))
    assert answer.status_code == 200 and b"SwaggerUIBundle" in answer.content
    assert b"validatorUrl" in answer.content  # no badge fetched from validator.swagger.io


def test_an_inline_script_with_the_request_s_nonce_is_allowed_by_that_response_only(rf):
    from csp.middleware import CSPMiddleware

    template = engines["django"].from_string(
        '<script nonce="{{ request.csp_nonce }}">start()</script>'
    )
    answers = [
        CSPMiddleware(lambda request: HttpResponse(template.render({}, request)))(rf.get("/"))
        for _ in range(2)
    ]
    nonces = [re.search(r'nonce="([^"]+)"', a.content.decode()).group(1) for a in answers]
    assert nonces[0] != nonces[1]
    for answer, nonce in zip(answers, nonces, strict=True):
        assert policy_of(answer)["script-src"] == ["'self'", f"'nonce-{nonce}'"]
    plain = CSPMiddleware(lambda request: HttpResponse("<p>no script</p>"))(rf.get("/"))
    assert policy_of(plain)["script-src"] == ["'self'"]


def _inline_scripts(html: str) -> list[str]:
    """<script> tags without a src and without a nonce."""
    return [
        tag
        for tag in re.findall(r"<script\b[^>]*>", html, flags=re.IGNORECASE)
        if not re.search(r"\bsrc\s*=", tag) and not re.search(r"\bnonce\s*=", tag)
    ]


_HANDLER = re.compile(r"<[a-zA-Z][^>]*\s(on[a-z]+)\s*=", re.DOTALL)
_STYLE_ATTRIBUTE = re.compile(r"<[a-zA-Z][^>]*\sstyle\s*=", re.DOTALL)
_COMMENT = re.compile(r"{#.*?#}|{% comment %}.*?{% endcomment %}", re.DOTALL)


def _templates():
    return sorted(p for p in TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("template", _templates(), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_template_has_an_inline_script_handler_or_style(template):
    text = _COMMENT.sub("", template.read_text())
    assert _inline_scripts(text) == [], "an inline <script> without nonce="
    handler = _HANDLER.search(text)
    assert handler is None, f"an inline {handler and handler.group(1)}= handler"
    assert _STYLE_ATTRIBUTE.search(text) is None, "a style= attribute (blocked: style-src 'self')"
    assert "<style" not in text.lower(), "a <style> element (blocked: style-src 'self')"


def test_the_template_scan_finds_what_it_looks_for(tmp_path):
    # The scan's own patterns, on the shapes the templates used to have.
    assert _inline_scripts("<script>\n  alert(1)\n</script>")
    assert not _inline_scripts('<script src="/static/x.js" defer></script>')
    assert not _inline_scripts('<script nonce="{{ request.csp_nonce }}">x()</script>')
    assert _HANDLER.search('<a href="#"\n   onclick="go()">')
    assert _HANDLER.search("<form method=post onsubmit=\"return confirm('x')\">")
    assert not _HANDLER.search('<a data-confirm="on=off">')
    assert _STYLE_ATTRIBUTE.search('<h1 style="flex:1">')


def test_an_operator_adds_a_cdn_or_analytics_host_with_BELVEDIR_CSP_EXTRA(monkeypatch):
    from belvedir.env import envcsp

    monkeypatch.setenv(
        "BELVEDIR_CSP_EXTRA",
        "script-src https://stats.example.com; connect-src https://stats.example.com;"
        " font-src https://fonts.example.com",
    )
    assert envcsp("BELVEDIR_CSP_EXTRA") == {
        "script-src": ["https://stats.example.com"],
        "connect-src": ["https://stats.example.com"],
        "font-src": ["https://fonts.example.com"],
    }
    for bad, says in [
        ("scripts-src https://x.example", "'scripts-src'"),
        ("script-src", "sources like"),
        ("img-src https://x.example,https://y.example", "sources like"),
        ("script-src 'unsafe-inline'", "nonce"),
        ("script-src 'self' 'unsafe-eval'", "nonce"),
    ]:
        monkeypatch.setenv("BELVEDIR_CSP_EXTRA", bad)
        with pytest.raises(ImproperlyConfigured, match=re.escape(says)):
            envcsp("BELVEDIR_CSP_EXTRA")


def test_the_policy_takes_the_operator_s_hosts_and_keeps_its_own():
    code = (
        "import django; django.setup()\nfrom csp.utils import build_policy\nprint(build_policy())\n"
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        "BELVEDIR_CSP_EXTRA": "script-src https://stats.example.com; "
        "frame-ancestors https://intranet.example.com; font-src https://fonts.example.com",
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=settings.BASE_DIR,
    ).stdout
    policy = dict((p.split()[0], p.split()[1:]) for p in out.strip().split("; "))
    assert policy["script-src"] == ["'self'", "https://stats.example.com"]
    assert policy["frame-ancestors"] == ["https://intranet.example.com"]  # 'none' gives way
    assert policy["font-src"] == ["'self'", "https://fonts.example.com"]
    assert policy["object-src"] == ["'none'"] and policy["style-src"] == ["'self'"]


INLINE_STYLE = re.compile(r"<style[\s>]|\sstyle\s*=", re.IGNORECASE)


@pytest.mark.django_db
def test_the_browsable_api_has_no_inline_style_and_its_code_colours_are_drfs(owner):
    from rest_framework.compat import pygments_css
    from rest_framework.renderers import BrowsableAPIRenderer

    page = owner.api.get("/api/v1/harnesses", HTTP_ACCEPT="text/html")

    html = page.content.decode()
    assert page.status_code == 200 and "Django REST framework" in html
    assert_strict(page)
    assert not INLINE_STYLE.search(html), INLINE_STYLE.search(html).group(0)
    assert "/static/api_code_style.css" in html
    served = (Path(settings.BASE_DIR) / "belvedir" / "static" / "api_code_style.css").read_text()
    assert pygments_css(BrowsableAPIRenderer.code_style) in served  # DRF's own, as a file
