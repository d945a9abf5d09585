"""The ASGI entry point: serve with `uvicorn belvedir.asgi:application` (see docs/operating.md).

The model router's paths (OpenAI-compatible, called by sandboxes with a run key) go to a
Django handler with no middleware: sessions, CSRF, auth, messages and the lockout checks are
for people in browsers, and under ASGI each of Django's own middleware hops to a worker thread
and back twice per request, which is most of what the router would add to a model call. Its
views answer their own errors, OpenAI-style.

The OTLP endpoint (`POST /api/v1/traces`, `INGEST_PATHS`) goes to a handler with no middleware
either, whose sync view runs in a pool of long-lived threads (`IngestHandler`). Under Django's
ASGI handler every request runs its sync code in a thread of its own, whose database connection
dies with it: each batch of spans paid for a new PostgreSQL connection (backend start, its
caches, statements planned afresh), which cut ingest under uvicorn to well below what the same
code stores under a WSGI server (bench/ingest.py `--server uvicorn`). The pool's threads bound
how many batches are stored at once. Everything else goes through the full stack.

Every request of this process takes its database connection from a pool that outlives the
threads (settings: BELVEDIR_DB_POOL, on when the settings load from importing this module) and
gives it back when it ends (request_finished's close_old_connections, or `_serve_in_thread`'s),
so no request starts a PostgreSQL backend once the pool holds enough.

The ASGI lifespan's startup imports the URLconf (so no request pays for it) and then leaves the
started process's objects out of the garbage collector's full collections (gc.freeze); its
shutdown runs what the apps left for it (`belvedir.lifespan`: the router's settlements still
pending).
"""

import asyncio
import contextlib
import gc
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.urls import get_resolver, set_script_prefix

from belvedir import lifespan

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
site = get_asgi_application()

# The router's endpoints (router/endpoints: OpenAI's and Anthropic's) and its model list.
BARE_PATHS = frozenset(
    f"/api/v1/{path}"
    for path in ("chat/completions", "completions", "embeddings", "responses", "messages", "models")
)


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

INGEST_PATHS = frozenset({"/api/v1/traces"})
_ingest_pool: ThreadPoolExecutor | None = None


def ingest_pool() -> ThreadPoolExecutor:
    """The threads ingest requests run in: one more than the view lets in at once, so the
    request past BELVEDIR_INGEST_CONCURRENCY gets the view's 503 rather than a queue."""
    global _ingest_pool
    if _ingest_pool is None:
        from django.conf import settings

        size = settings.BELVEDIR_INGEST_CONCURRENCY + 1
        _ingest_pool = ThreadPoolExecutor(size, thread_name_prefix="ingest")
    return _ingest_pool


def _serve_in_thread(request):
    """The view, in a pool thread, with the full stack's duties for it: the connection
    checked before and after (request_started / request_finished's close_old_connections),
    the query log reset, and an unexpected error under /api/ answered as JSON
    (ApiServerErrorMiddleware)."""
    from django.core.exceptions import PermissionDenied
    from django.db import close_old_connections, reset_queries
    from django.http import Http404
    from django.urls import resolve

    from belvedir.errors import DomainError
    from belvedir.middleware import api_server_error_response, log

    reset_queries()
    close_old_connections()
    try:
        match = resolve(request.path_info)
        return match.func(request, *match.args, **match.kwargs)
    except (Http404, PermissionDenied, DomainError):
        raise  # answered as the full stack answers them (none comes from the ingest view)
    except Exception as exc:
        log.error(
            "Internal Server Error: %s", request.path, exc_info=exc, extra={"request": request}
        )
        return api_server_error_response()
    finally:
        close_old_connections()


class IngestHandler(BareHandler):
    """The bare handler with its view run in `ingest_pool()` instead of a thread per request."""

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async)
        self._middleware_chain = convert_exception_to_response(self._in_pool)

    async def _in_pool(self, request):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(ingest_pool(), _serve_in_thread, request)


ingest = IngestHandler()


def _freeze_startup_heap() -> None:
    """Leave what the process holds once started (modules, models, URLconf: ~130,000 objects)
    out of the garbage collector's full collections: a batch of spans allocates enough for
    one every few dozen batches, and each walked the whole heap (~0.8 ms a batch on average,
    in-process). Garbage made so far is collected first, so none is kept for good."""
    gc.collect()
    gc.freeze()


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            # The URLconf imports every app's views: done before serving, not by a request.
            await sync_to_async(lambda: get_resolver().url_patterns)()
            _freeze_startup_heap()
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


# Uploads (adapter zips, a task sandbox's build context and files): Django's ASGI handler
# spools the whole body to disk before any view runs (and its form parser reads nothing of a
# body without a length), so an upload must say its length and is refused here, before a byte
# of it is read, when that is past the limit (the form fields get a little room). The server
# holds the body to the length it declared.
UPLOAD_PATHS = frozenset({"/api/v1/models", "/models/upload/"})
TASK_SANDBOX_CONTEXT = "/api/v1/task-sandboxes"
TASK_SANDBOX_FILES = re.compile(r"^/api/v1/task-sandboxes/[^/]+/files$")
FORM_ROOM = 1024 * 1024


@dataclass(frozen=True)
class UploadLimit:
    bytes: int  # the file's own limit; a form gets FORM_ROOM on top
    what: str
    setting: str
    code: str
    room: int = FORM_ROOM


def _upload_limit(scope) -> UploadLimit | None:
    method, path = scope.get("method"), scope["path"]
    if method == "POST" and path in UPLOAD_PATHS:
        from django.conf import settings

        return UploadLimit(
            settings.BELVEDIR_ADAPTER_MAX_BYTES,
            "adapter zips",
            " (BELVEDIR_ADAPTER_MAX_BYTES)",
            "adapter_too_large",
        )
    if (method == "POST" and path == TASK_SANDBOX_CONTEXT) or (
        method == "PUT" and TASK_SANDBOX_FILES.match(path)
    ):
        from django.conf import settings

        if method == "POST":
            context = settings.BELVEDIR_TASK_SANDBOX_CONTEXT_MAX_BYTES
            return UploadLimit(context, "build contexts", "", "too_large")
        files = settings.BELVEDIR_TASK_SANDBOX_UPLOAD_MAX_BYTES
        return UploadLimit(files, "task-sandbox files", "", "too_large", room=0)
    return None


async def _refuse(send, status: int, detail: str, code: str) -> None:
    body = json.dumps({"detail": detail, "code": code}).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _upload_refused(scope, send, limit: UploadLimit) -> bool:
    from belvedir.text import size_text

    length = dict(scope.get("headers") or []).get(b"content-length", b"")
    if not length.isdigit():
        detail = f"Send the upload of {limit.what} with a Content-Length (not chunked)."
        await _refuse(send, 411, detail, "length_required")
        return True
    if int(length) > limit.bytes + limit.room:
        detail = (
            f"The upload is over the {size_text(limit.bytes)} limit for "
            f"{limit.what}{limit.setting}."
        )
        await _refuse(send, 413, detail, limit.code)
        return True
    return False


async def application(scope, receive, send):
    if scope["type"] == "http" and _bare(scope):
        return await bare(scope, receive, send)
    if scope["type"] == "http" and scope["path"] in INGEST_PATHS:
        return await ingest(scope, receive, send)
    limit = _upload_limit(scope) if scope["type"] == "http" else None
    if limit is not None and await _upload_refused(scope, send, limit):
        return
    if scope["type"] == "lifespan":
        return await _lifespan(receive, send)
    return await site(scope, receive, send)
