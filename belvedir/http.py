"""Answers for a POST that succeeded: the browser goes on with a GET, so a reload never repeats it."""

from django.http import HttpResponseRedirect
from django.shortcuts import resolve_url


class HttpResponseSeeOther(HttpResponseRedirect):
    status_code = 303


def see_other(to, *args, **kwargs) -> HttpResponseSeeOther:
    """303 See Other to `to` (a URL name with its arguments, a model or a URL), like `redirect`."""
    return HttpResponseSeeOther(resolve_url(to, *args, **kwargs))
