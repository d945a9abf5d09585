"""Request-wide guards: NUL characters refused, the audit context, JSON errors for the API,
the styled 404 page in DEBUG."""

import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import render

from belvedir.error_responses import page_response
from belvedir.errors import DomainError, NotFound
from belvedir.middleware_modes import BothModes

log = logging.getLogger("django.request")


class RejectNulMiddleware(BothModes):
    def __call__(self, request):
        query_has_nul = any(
            "\x00" in key or "\x00" in value
            for key, values in request.GET.lists()
            for value in values
        )
        if "\x00" in request.path or query_has_nul:
            response = JsonResponse({"detail": "The URL contains a NUL character."}, status=400)
            return self._now(response) if self.is_async else response
        return super().__call__(request)

    async def _now(self, response):
        return response


class AuditContextMiddleware(BothModes):
    """Audit records made while serving a request read its address and actor from it."""

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        from belvedir import audit

        token = audit.request_bind(request)
        try:
            return self.get_response(request)
        finally:
            audit.request_unbind(token)

    async def __acall__(self, request):
        from belvedir import audit

        token = audit.request_bind(request)
        try:
            return await self.get_response(request)
        finally:
            audit.request_unbind(token)


class ApiServerErrorMiddleware(BothModes):
    """An unexpected error under /api/ answers JSON, never Django's HTML 500 page."""

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


class StyledNotFoundMiddleware(BothModes):
    """With DEBUG on (`make up`), Django answers an unknown URL or a bare Http404 with its
    technical page, which lists every URL pattern: pages answer with our 404 page instead.

    Our own error pages (`belvedir.error_responses`) and anything under /api/ pass through.
    It sits inside the session, CSRF and auth middleware, so the page renders as any other.
    """

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return self._styled(request, self.get_response(request))

    async def __acall__(self, request):
        response = await self.get_response(request)
        if self._needs_page(request, response):
            return await sync_to_async(self._styled)(request, response)
        return response

    def _needs_page(self, request, response) -> bool:
        return (
            settings.DEBUG
            and response.status_code == 404
            and not request.path.startswith("/api/")
            and response.get("Content-Type", "").startswith("text/html")
            and not getattr(response, "styled_error", False)
        )

    def _styled(self, request, response):
        if self._needs_page(request, response):
            if getattr(request, "htmx", False):  # a fragment's request: the message, in #page-error
                return page_response(request, NotFound("Nothing is at this address."))
            return not_found_page(request)
        return response


def not_found_page(request, exception=None):
    """The site's 404 page (also `handler404`)."""
    response = render(request, "404.html", status=404)
    response.styled_error = True
    return response
