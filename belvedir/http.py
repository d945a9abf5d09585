"""Answers for a POST that succeeded: the browser goes on with a GET, so a reload never repeats it."""

from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django_htmx.http import HttpResponseClientRedirect


class HttpResponseSeeOther(HttpResponseRedirect):
    status_code = 303


def see_other(to, *args, **kwargs) -> HttpResponseSeeOther:
    """303 See Other to `to` (a URL name with its arguments, a model or a URL), like `redirect`."""
    return HttpResponseSeeOther(resolve_url(to, *args, **kwargs))


def see_other_page(request, to, *args, **kwargs) -> HttpResponse:
    """`see_other`, or for an HTMX request an `HX-Redirect` to it: the whole page goes there
    (a 303 would be followed by htmx and its page swapped into the form's target)."""
    url = resolve_url(to, *args, **kwargs)
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(url)
    return HttpResponseSeeOther(url)
