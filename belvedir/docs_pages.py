"""The platform's own documentation (this checkout's docs/*.md), served as text so a page can
link to the page that explains it: `GET /docs/<name>.md`, no login needed (it is the public
documentation). Only a file directly in docs/, named with lowercase letters, digits and dashes;
anything else (another folder, a symlink out of docs/, another name) is a 404. The pages' own
relative links (`harness-contract.md`) resolve to their neighbours here."""

import re
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_safe

DOC_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}$")


def docs_root() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def doc_path(name: str) -> Path | None:
    """docs/<name>.md when `name` is a doc's name and the file is there, in docs/ itself."""
    if not DOC_NAME.match(name):
        return None
    root = docs_root().resolve()
    path = (root / f"{name}.md").resolve()
    return path if path.parent == root and path.is_file() else None


@require_safe
def doc_page(request, name: str):
    path = doc_path(name)
    if path is None:
        raise Http404("no such page of the documentation")
    response = HttpResponse(path.read_bytes(), content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "public, max-age=300"
    response["X-Content-Type-Options"] = "nosniff"
    return response
