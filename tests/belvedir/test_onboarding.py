"""What a visitor and a new organization see first: the landing page, the next steps, the key's
usage snippets with the platform's URL."""

import html as htmllib
import re
from pathlib import Path

from belvedir.models import ApiKey

DOCS = Path(__file__).resolve().parents[2] / "docs"

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_signed_out_visitor_sees_what_the_product_is_with_log_in_and_sign_up(client, db):
    response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "isolated sandbox" in html and "results.json" in html
    assert 'href="/login/"' in html and 'href="/signup/"' in html
    assert "Project settings" not in html


def test_the_login_page_says_what_belvedir_is(client, db):
    html = client.get("/login/").content.decode()
    assert "What is Belvedir?" in html and "sandboxes" in html


def test_a_new_organizations_home_lists_the_four_next_steps_with_links(client, db):
    client.post(
        "/signup/", {"email": "new@example.com", "password": "long-enough-9", "organization": "N"}
    )
    html = client.get("/").content.decode()
    steps = re.findall(r'data-step="(\w+)"', html)
    assert steps == ["key", "harness", "run", "traces"]
    assert 'href="/settings/project/"' in html and 'href="/harnesses/new/"' in html
    assert 'href="/runs/new/"' in html and 'href="/settings/project/#key-usage"' in html
    # The app that owns a step says whether it is done: pulled in with hx-get.
    assert 'hx-get="/harnesses/?fragment=onboarding-step"' in html
    assert 'hx-get="/traces/?fragment=onboarding-step"' in html
    assert 'hx-get="/runs/?fragment=dashboard"' in html
    assert not re.search(r'class="step done" data-step="key"', html)


def test_the_key_step_is_ticked_once_the_project_has_a_key(owner):
    html = owner.web.get("/").content.decode()  # the owner fixture made a key
    assert re.search(r'class="step done" data-step="key"', html)


def test_the_home_page_needs_a_membership(client, db):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="l@example.com", email="l@example.com")
    client.force_login(user)
    assert client.get("/").status_code == 404


def test_the_key_page_shows_cli_curl_and_sdk_snippets_with_the_platform_url(owner, settings):
    settings.BELVEDIR_BASE_URL = "https://bench.example.org"
    html = owner.web.get("/settings/project/").content.decode()
    for snippet in ("snippet-cli", "snippet-curl", "snippet-sdk", "snippet-sdk-node"):
        block = re.search(rf'<pre id="{snippet}">(.*?)</pre>', html, re.S).group(1)
        assert "bench.example.org" in block and "bv_live_…" in block
    assert "export BELVEDIR_URL=https://bench.example.org" in html
    assert 'curl -H "Authorization: Bearer bv_live_…"' in html


def test_the_snippets_hold_the_key_just_created(owner, settings):
    settings.BELVEDIR_BASE_URL = "https://bench.example.org"
    response = owner.web.post("/settings/project/keys/new/", {"key-name": "ci"}, **HTMX)
    html = response.content.decode()
    plaintext = re.search(r"bv_live_\w{20,}", html).group(0)
    assert ApiKey.objects.filter(name="ci").exists()
    assert f"export BELVEDIR_API_KEY={plaintext}" in html
    assert f'api_key="{plaintext}"' in html
    assert f'apiKey: "{plaintext}"' in html


def test_read_only_members_see_the_steps_but_no_key_is_revealed(readonly):
    html = readonly.web.get("/").content.decode()
    assert 'data-step="harness"' in html
    usage = readonly.web.get("/settings/project/").content.decode()
    assert "bv_live_…" in usage and "BELVEDIR_API_KEY=bv_live_…" in usage


def node_snippet(page: str) -> str:
    return htmllib.unescape(re.search(r'<pre id="snippet-sdk-node">(.*?)</pre>', page, re.S)[1])


def test_the_node_snippet_is_the_docs_with_the_key_the_url_and_a_session(owner, settings):
    """docs/sdk-node.md's snippet, its environment's names given as values, after the npm
    install of the package the platform serves (/sdk/node/belvedir.tgz)."""
    settings.BELVEDIR_BASE_URL = "https://bench.example.org"
    install, program = node_snippet(owner.web.get("/settings/project/").content.decode()).split(
        "\n\n", 1
    )
    assert install == "npm install https://bench.example.org/sdk/node/belvedir.tgz openai"
    docs = re.search(r"```ts\n(.*?)```", (DOCS / "sdk-node.md").read_text(), re.S)[1]
    as_given = (
        docs.replace("process.env.BELVEDIR_API_KEY", '"bv_live_…"')
        .replace("process.env.BELVEDIR_BASE_URL", '"https://bench.example.org"')
        .replace("process.env.BELVEDIR_RUN_ID", '"my-first-session"')
        .replace('"my-benchmark"', '"my-agent"')
    )
    assert program == as_given.rstrip("\n")
