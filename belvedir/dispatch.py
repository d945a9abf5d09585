"""One path served by two apps' views, chosen by the request's method, each named by its
dotted path like `include()` names a URLconf: imported on the first request, so the root
URLconf that mounts it imports no app, and neither app calls the other's view."""

import asyncio
import functools

from asgiref.sync import sync_to_async
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt


@functools.cache
def _view(dotted: str):
    """The view at `dotted` (a class-based view's `as_view()`), callable from the event loop."""
    view = import_string(dotted)
    if isinstance(view, type):
        view = view.as_view()
    if asyncio.iscoroutinefunction(view):
        return view
    return sync_to_async(view)


def by_method(*, default: str, **methods: str):
    """A view passing each request to the view named for its method (`POST="app.api.View"`),
    else to `default`. CSRF is each view's own to check (DRF's views check it for a session,
    the router's take a bearer key)."""

    @csrf_exempt
    async def dispatch(request, *args, **kwargs):
        return await _view(methods.get(request.method, default))(request, *args, **kwargs)

    return dispatch
