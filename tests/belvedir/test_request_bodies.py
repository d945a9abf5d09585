"""Bodies the REST API cannot take are the caller's error, answered by the one error model: past
Django's DATA_UPLOAD_MAX_MEMORY_SIZE a 413, JSON nested past what Python decodes a 400, on every
endpoint (one parser and one exception handler for all, not a check per view)."""

import json

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework import parsers
from rest_framework.views import APIView

from belvedir.parsers import JSONParser

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000


def _endpoints(owner, harness) -> list[tuple[str, str]]:
    return [
        ("post", "/api/v1/runs"),
        ("post", "/api/v1/harnesses"),
        ("patch", f"/api/v1/harnesses/{harness.pk}"),
        ("post", "/api/v1/keys"),
        ("post", "/api/v1/environments"),
    ]


def _send(owner, method: str, path: str, body: str):
    owner.api.raise_request_exception = False
    return getattr(owner.api, method)(path, data=body, content_type="application/json")


def test_a_body_past_the_upload_limit_is_a_413_naming_the_limit(owner, harness):
    body = json.dumps({"name": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    for method, path in _endpoints(owner, harness):
        answer = _send(owner, method, path, body)
        assert answer.status_code == 413, (path, answer.status_code, answer.content[:200])
        assert answer.json()["code"] == "body_too_large"
        assert "2.5 MB" in answer.json()["detail"]


def test_json_nested_a_hundred_thousand_deep_is_a_400_parse_error(owner, harness):
    for method, path in _endpoints(owner, harness):
        answer = _send(owner, method, path, DEEP)
        assert answer.status_code == 400, (path, answer.status_code, answer.content[:200])
        assert answer.json()["code"] == "parse_error"
        assert "nested too deeply" in answer.json()["detail"]


def test_a_body_under_the_limit_and_ordinary_malformed_json_are_answered_as_before(owner):
    created = _send(owner, "post", "/api/v1/keys", json.dumps({"name": "ci " + "x" * 100}))
    malformed = _send(owner, "post", "/api/v1/keys", '{"name": ')

    assert created.status_code == 201
    assert (malformed.status_code, malformed.json()["code"]) == (400, "parse_error")


def _api_views(patterns=None):
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            yield from _api_views(entry.url_patterns)
        elif isinstance(entry, URLPattern):
            view = getattr(entry.callback, "cls", None)
            if isinstance(view, type) and issubclass(view, APIView):
                yield view


def test_every_api_view_that_takes_json_parses_it_with_the_guarded_parser():
    views = list(_api_views())
    assert len(views) > 20
    for view in views:
        for parser in view.parser_classes:
            if issubclass(parser, parsers.JSONParser):
                assert issubclass(parser, JSONParser), (view, parser)


def test_the_outcomes_endpoint_answers_json_nested_too_deep_with_a_400(owner):
    """The ingest endpoints are plain views with their own limits (64 KB for outcomes): JSON
    nested past what Python decodes within them is a 400 too."""
    deep = "[" * 30_000 + "]" * 30_000

    answer = _send(owner, "post", "/api/v1/outcomes", deep)

    assert answer.status_code == 400
