"""Domain errors as HTTP answers: the one status table, used by the REST API and the pages.

- The API (`belvedir.api.exception_handler`) answers `{field: [message]}` or
  `{"detail": message, "code": code}` with the table's status.
- A page form that catches a domain error calls `form_error(form, exc)` and renders with
  `form_status(form)`, so an HTMX form shows the message inline with the right status;
  `form_submit(form, call)` is that for the usual POST: validate, call the service, catch.
- A domain error a page view does not catch is answered by `DomainErrorMiddleware`: an error
  page, or for HTMX the message swapped into the page's `#page-error` box.
"""

from collections.abc import Callable
from typing import TypeVar

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.http import reswap, retarget

from belvedir.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    LimitReached,
    NotFound,
    PaymentRequired,
    TooLarge,
    Unavailable,
)
from belvedir.middleware_modes import BothModes

STATUS: dict[type[DomainError], int] = {
    Invalid: 400,
    PaymentRequired: 402,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    LimitReached: 429,
    Unavailable: 503,
    DomainError: 400,
}

PAGE_ERROR_TARGET = "#page-error"

T = TypeVar("T")


def status_of(exc: DomainError) -> int:
    """The HTTP status for `exc`: the nearest class of it in the table."""
    return next(STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS)


def headers_of(exc: DomainError) -> dict[str, str]:
    return {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}


def body_of(exc: DomainError) -> dict:
    return exc.as_dict()


# --- pages --------------------------------------------------------------------------------


def form_error(form, exc: DomainError) -> None:
    """Show `exc` on `form`: on its field when the form has one, else above the fields."""
    form.add_error(exc.field if exc.field in form.fields else None, exc.message)
    form.domain_error = exc


def form_submit(form, call: Callable[[dict], T]) -> T | None:
    """A posted form: when it is valid, `call(form.cleaned_data)` (a service call) and its result.
    None when the form is invalid or the service refused: its message is then on the form
    (`form_error`), to render again with `form_status(form)`. The service returns a value."""
    if not form.is_valid():
        return None
    try:
        return call(form.cleaned_data)
    except DomainError as exc:
        form_error(form, exc)
        return None


def form_status(*forms) -> int:
    """The status to render `forms` with: the first domain error's, 400 for plain form errors."""
    for form in forms:
        exc = getattr(form, "domain_error", None)
        if exc is not None:
            return status_of(exc)
    return 400 if any(form.errors for form in forms) else 200


def page_response(request: HttpRequest, exc: DomainError) -> HttpResponse:
    """An error page, or for an HTMX request the message for the page's `#page-error` box."""
    status = status_of(exc)
    context = {"error": exc, "status": status}
    if getattr(request, "htmx", False):
        response = render(request, "belvedir/error.html#error-message", context, status=status)
        reswap(retarget(response, PAGE_ERROR_TARGET), "innerHTML")
    else:
        response = render(request, "belvedir/error.html", context, status=status)
    for name, value in headers_of(exc).items():
        response[name] = value
    response.styled_error = True  # StyledNotFoundMiddleware keeps it
    return response


class DomainErrorMiddleware(BothModes):
    """Answers a domain error that a page view let through (DRF views answer their own)."""

    def process_exception(self, request, exc):
        if isinstance(exc, DomainError):
            return page_response(request, exc)
        return None
