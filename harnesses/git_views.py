"""The platform's drivers as read-only git repositories over HTTP (git's dumb protocol):
`git clone {BELVEDIR_BASE_URL}/git/belvedir-runner.git`. Public, GET and HEAD only; the
files are those of the bare repository `harnesses.drivers` builds."""

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_safe

from belvedir.files import StreamedFileResponse
from harnesses import drivers

_TEXT = ("HEAD", "info/refs", "objects/info/packs", "objects/info/alternates")


@require_safe
def git_file(request, name: str, path: str):
    try:
        found = drivers.served_file(name, path)
    except drivers.DriverError:
        found = None
    if found is None:
        raise Http404(f"No file {path} in driver {name}.")
    if path in _TEXT:  # these change when drivers/ changes: never cached stale
        response = HttpResponse(found.read_bytes(), content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        return response
    response = StreamedFileResponse(found.open("rb"), content_type="application/octet-stream")
    immutable = path.startswith("objects/pack/")  # named by their content
    response["Cache-Control"] = "public, max-age=86400" if immutable else "no-cache"
    return response
