"""GET /docs/<name>.md serves this checkout's docs/*.md as text, and nothing else: the run
page links its harness contract there."""

from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]


def test_a_doc_is_served_as_text_without_a_login(client: Client):
    response = client.get("/docs/harness-contract.md")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content == (ROOT / "docs" / "harness-contract.md").read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        "/docs/no-such-page.md",
        "/docs/../README.md",
        "/docs/..%2FREADME.md",
        "/docs/%2E%2E/README.md",
        "/docs/..%2Fbelvedir%2Fsettings%2Fcore.py%00.md",
        "/docs/Harness-Contract.md",  # the names are lowercase
        "/docs/harness-contract.md.md",
        "/docs/architecture",
        "/docs/.md",
    ],
)
def test_anything_but_a_doc_of_docs_is_refused(client: Client, path):
    response = client.get(path)
    # 404; a NUL in the URL is refused before any view (400).
    assert response.status_code == (400 if "%00" in path else 404), (path, response.content)


def test_a_symlink_out_of_docs_is_not_followed(client: Client, settings, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "secret.txt").write_text("SECRET_KEY=abc")
    (tmp_path / "docs" / "leak.md").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "docs" / "inner").mkdir()
    (tmp_path / "docs" / "inner" / "page.md").write_text("inner")
    (tmp_path / "docs" / "page.md").write_text("# a page\n")
    settings.BASE_DIR = tmp_path
    assert client.get("/docs/page.md").content == b"# a page\n"
    assert client.get("/docs/leak.md").status_code == 404
    assert client.get("/docs/inner/page.md").status_code == 404


def test_only_reads_are_answered(client: Client):
    assert client.post("/docs/harness-contract.md").status_code == 405
