"""The ASGI entry point: serve with `uvicorn belvedir.asgi:application` (see the README).

The model router's paths (OpenAI-compatible, called by sandboxes with a run key) go to a
Django handler with no middleware: sessions, CSRF, auth, messages and the lockout checks are
for people in browsers, and under ASGI each of Django's own middleware hops to a worker thread
and back twice per request, which is most of what the router would add to a model call. Its
views answer their own errors, OpenAI-style. Everything else goes through the full stack.
"""

import os

from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
site = get_asgi_application()

BARE_PATHS = frozenset({"/api/v1/chat/completions", "/api/v1/models"})


class BareHandler(ASGIHandler):
    """Django's ASGI handler with an empty middleware chain (URL resolution and views only)."""

    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)


bare = BareHandler()


def _bare(scope) -> bool:
    # POST /api/v1/models is a fine-tuned model's upload (the REST API): the full stack.
    return scope["path"] in BARE_PATHS and not (
        scope["path"] == "/api/v1/models" and scope.get("method") != "GET"
    )


async def application(scope, receive, send):
    if scope["type"] == "http" and _bare(scope):
        return await bare(scope, receive, send)
    return await site(scope, receive, send)
