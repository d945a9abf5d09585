"""Request-wide guards: NUL characters refused, the audit context, JSON errors for the API,
the styled 404 page in DEBUG."""

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import render

from belvedir.error_responses import page_response
from belvedir.errors import DomainError, NotFound

log = logging.getLogger("django.request")


class RejectNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query_has_nul = any(
            "\x00" in key or "\x00" in value
            for key, values in request.GET.lists()
            for value in values
        )
        if "\x00" in request.path or query_has_nul:
            return JsonResponse({"detail": "The URL contains a NUL character."}, status=400)
        return self.get_response(request)


class AuditContextMiddleware:
    """Audit records made while serving a request read its address and actor from it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from belvedir import audit

        token = audit.request_bind(request)
        try:
            return self.get_response(request)
        finally:
            audit.request_unbind(token)


class ApiServerErrorMiddleware:
    """An unexpected error under /api/ answers JSON, never Django's HTML 500 page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not request.path.startswith("/api/") or isinstance(
            exception, Http404 | PermissionDenied | DomainError
        ):
            return None  # answered by their own handlers
        log.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"request": request},
        )
        return api_server_error_response()


def api_server_error_response() -> JsonResponse:
    return JsonResponse(
        {"detail": "Server error: something went wrong on our side; it has been logged."},
        status=500,
    )


class StyledNotFoundMiddleware:
    """With DEBUG on (`make up`), Django answers an unknown URL or a bare Http404 with its
    technical page, which lists every URL pattern: pages answer with our 404 page instead.

    Our own error pages (`belvedir.error_responses`) and anything under /api/ pass through.
    It sits inside the session, CSRF and auth middleware, so the page renders as any other.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and not request.path.startswith("/api/")
            and response.get("Content-Type", "").startswith("text/html")
            and not getattr(response, "styled_error", False)
        ):
            if getattr(request, "htmx", False):  # a fragment's request: the message, in #page-error
                return page_response(request, NotFound("Nothing is at this address."))
            return not_found_page(request)
        return response


def not_found_page(request, exception=None):
    """The site's 404 page (also `handler404`)."""
    response = render(request, "404.html", status=404)
    response.styled_error = True
    return response
