"""The ASGI entry point: serve with `uvicorn belvedir.asgi:application` (see the README).

The model router's paths (OpenAI-compatible, called by sandboxes with a run key) go to a
Django handler with no middleware: sessions, CSRF, auth, messages and the lockout checks are
for people in browsers, and under ASGI each of Django's own middleware hops to a worker thread
and back twice per request, which is most of what the router would add to a model call. Its
views answer their own errors, OpenAI-style. Everything else goes through the full stack.

The ASGI lifespan's shutdown runs what the apps left for it (`belvedir.lifespan`: the router's
settlements still pending).
"""

import asyncio
import contextlib
import os

from django.core.asgi import get_asgi_application
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.urls import set_script_prefix

from belvedir import lifespan

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
site = get_asgi_application()

BARE_PATHS = frozenset({"/api/v1/chat/completions", "/api/v1/models"})


class BareHandler(ASGIHandler):
    """Django's ASGI handler with an empty middleware chain (URL resolution and views only),
    and without the request_started and request_finished signals: their receivers
    (close_old_connections, reset_queries) tend the database connections of the thread the
    signals run in, and a bare view uses none there (its database work runs in worker
    threads that tend their own); under ASGI each signal is a hop to a thread and back."""

    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)

    async def handle(self, scope, receive, send):
        """Django's `ASGIHandler.handle` less the signals: the view is cancelled when the
        client disconnects (which cancels the router's upstream call)."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            request, error_response = self.create_request(scope, body_file)
            if request is None:
                await self.send_response(error_response, send)
                return

            async def process_request():
                response = await self.run_get_response(request)
                with contextlib.suppress(asyncio.CancelledError):  # the client left meanwhile
                    await self.send_response(response, send)

            disconnect = asyncio.create_task(self.listen_for_disconnect(receive))
            processing = asyncio.create_task(process_request())
            await asyncio.wait([disconnect, processing], return_when=asyncio.FIRST_COMPLETED)
            for task in (disconnect, processing):
                if not task.done():
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, RequestAborted):
                    await task
        finally:
            body_file.close()


bare = BareHandler()


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await lifespan.shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


def _bare(scope) -> bool:
    # POST /api/v1/models is a fine-tuned model's upload (the REST API): the full stack.
    return scope["path"] in BARE_PATHS and not (
        scope["path"] == "/api/v1/models" and scope.get("method") != "GET"
    )


async def application(scope, receive, send):
    if scope["type"] == "http" and _bare(scope):
        return await bare(scope, receive, send)
    if scope["type"] == "lifespan":
        return await _lifespan(receive, send)
    return await site(scope, receive, send)
