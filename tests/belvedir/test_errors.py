"""One error model: each domain error class answers the same status on the API and on the pages."""

import pytest
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.http import Http404
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails
from rest_framework.exceptions import NotAuthenticated

from belvedir.api import exception_handler
from belvedir.error_responses import DomainErrorMiddleware, form_error, form_status, form_submit
from belvedir.errors import (
    DomainError,
    Forbidden,
    Invalid,
    LimitReached,
    NotFound,
    PaymentRequired,
    Unavailable,
)
from belvedir.http import see_other_page

# (error, status, API body, Retry-After)
TABLE = [
    (Invalid("Name is required.", field="name"), 400, {"name": ["Name is required."]}, None),
    (
        Invalid("That cannot be done."),
        400,
        {"detail": "That cannot be done.", "code": "invalid"},
        None,
    ),
    (NotFound("Not found."), 404, {"detail": "Not found.", "code": "not_found"}, None),
    (
        Forbidden("Read-only members cannot change anything."),
        403,
        {"detail": "Read-only members cannot change anything.", "code": "forbidden"},
        None,
    ),
    (
        LimitReached("Too many runs today.", code="cap_daily", retry_after=90),
        429,
        {"detail": "Too many runs today.", "code": "cap_daily"},
        "90",
    ),
    (
        PaymentRequired("The balance does not cover this run."),
        402,
        {"detail": "The balance does not cover this run.", "code": "payment_required"},
        None,
    ),
    (
        Unavailable("The router is overloaded.", retry_after=5),
        503,
        {"detail": "The router is overloaded.", "code": "unavailable"},
        "5",
    ),
    (
        DomainError("A rule was broken."),
        400,
        {"detail": "A rule was broken.", "code": "invalid"},
        None,
    ),
]
IDS = [type(row[0]).__name__ + ("_field" if row[0].field else "") for row in TABLE]


@pytest.mark.parametrize(("error", "status", "body", "retry_after"), TABLE, ids=IDS)
def test_the_api_answers_each_domain_error_with_its_status_and_body(
    error, status, body, retry_after
):
    response = exception_handler(error, {})
    assert response.status_code == status
    assert response.data == body
    assert response.headers.get("Retry-After") == retry_after


def _page_request(*, htmx: bool):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    request = RequestFactory().post("/harnesses/new", **headers)
    request.user = AnonymousUser()
    request.htmx = HtmxDetails(request)
    return request


@pytest.mark.parametrize(("error", "status", "body", "retry_after"), TABLE, ids=IDS)
def test_a_page_answers_each_uncaught_domain_error_with_its_status_and_message(
    error, status, body, retry_after
):
    middleware = DomainErrorMiddleware(lambda request: None)
    response = middleware.process_exception(_page_request(htmx=False), error)
    assert response.status_code == status
    assert "<html" in response.content.decode()
    assert error.message in response.content.decode()
    assert response.headers.get("Retry-After") == retry_after


@pytest.mark.parametrize(("error", "status", "body", "retry_after"), TABLE, ids=IDS)
def test_an_htmx_request_gets_the_message_swapped_into_the_page_error_box(
    error, status, body, retry_after
):
    middleware = DomainErrorMiddleware(lambda request: None)
    response = middleware.process_exception(_page_request(htmx=True), error)
    assert response.status_code == status
    html = response.content.decode()
    assert "<html" not in html and error.message in html
    assert f'data-code="{error.code}"' in html
    assert response["HX-Retarget"] == "#page-error"
    assert response["HX-Reswap"] == "innerHTML"


class NameForm(forms.Form):
    name = forms.CharField(required=False)


@pytest.mark.parametrize(("error", "status", "body", "retry_after"), TABLE, ids=IDS)
def test_a_form_shows_each_domain_error_inline_with_its_status(error, status, body, retry_after):
    form = NameForm({"name": "x"})
    assert form.is_valid()
    form_error(form, error)
    assert form_status(form) == status
    where = "name" if error.field == "name" else "__all__"
    assert form.errors[where] == [error.message]


def test_a_form_with_only_plain_field_errors_answers_400_and_a_clean_form_200():
    class Required(forms.Form):
        name = forms.CharField()

    assert form_status(Required({})) == 400
    assert form_status(Required({"name": "ok"}), NameForm({})) == 200


def test_the_first_form_with_a_domain_error_sets_the_status_of_a_page_with_two_forms():
    plain, refused = NameForm({}), NameForm({"name": "x"})
    plain.is_valid(), refused.is_valid()
    form_error(refused, LimitReached("Too many."))
    assert form_status(plain, refused) == 429


def test_a_submitted_form_gives_the_service_its_data_and_answers_its_result():
    form = NameForm({"name": "x"})
    assert form_submit(form, lambda data: f"saved {data['name']}") == "saved x"
    assert form_status(form) == 200


def test_a_service_refusal_lands_on_the_submitted_form_and_an_invalid_form_calls_nothing():
    def refuse(data):
        raise LimitReached("Too many.")

    refused = NameForm({"name": "x"})
    assert form_submit(refused, refuse) is None
    assert form_status(refused) == 429 and refused.errors["__all__"] == ["Too many."]

    class Required(forms.Form):
        name = forms.CharField()

    invalid, called = Required({}), []
    assert form_submit(invalid, called.append) is None
    assert called == [] and form_status(invalid) == 400


def test_a_page_redirect_after_a_post_is_a_303_or_for_htmx_an_hx_redirect():
    plain = see_other_page(_page_request(htmx=False), "/settings/")
    assert plain.status_code == 303 and plain["Location"] == "/settings/"
    htmx = see_other_page(_page_request(htmx=True), "/settings/")
    assert htmx.status_code == 200 and htmx["HX-Redirect"] == "/settings/"


def test_the_status_follows_the_class_not_the_code():
    assert exception_handler(Invalid("x", code="cap_daily"), {}).status_code == 400
    assert exception_handler(LimitReached("x", code="repo"), {}).status_code == 429


def test_not_found_and_forbidden_are_still_djangos_404_and_403():
    from django.core.exceptions import PermissionDenied

    assert isinstance(NotFound("Not found."), Http404)
    assert isinstance(Forbidden("No."), PermissionDenied)


def test_a_plain_http404_answers_not_found_without_naming_the_model():
    response = exception_handler(Http404("No Run matches the given query."), {})
    assert response.status_code == 404
    assert response.data == {"detail": "Not found.", "code": "not_found"}


def test_drfs_own_errors_keep_their_status_and_gain_a_code():
    response = exception_handler(NotAuthenticated(), {})
    assert response.status_code == 401
    assert response.data["code"] == "not_authenticated"
    assert response.data["detail"]
