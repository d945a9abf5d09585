"""OpenAPI pieces every API module shares: the error shapes as components, the key scheme.

`errors(400, 401, 404)` gives an `@extend_schema(responses=...)` the documented error answers,
one per status of the table in `belvedir.error_responses`.
"""

import inspect

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.plumbing import get_doc
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class AutoSchema(openapi.AutoSchema):
    """Descriptions come from the method's or the view's own docstring, never from one the
    view inherits (a mixin's docstring is about code, not about the endpoint)."""

    def get_description(self) -> str:
        method_doc = get_doc(getattr(self.view, self.method.lower(), None))
        own_doc = type(self.view).__dict__.get("__doc__")
        return method_doc or (inspect.cleandoc(own_doc) if own_doc else "")

    def map_parsers(self) -> list[str]:
        # The API also parses forms, for the browsable API; what clients should send is JSON.
        return ["application/json"]


class ErrorSerializer(serializers.Serializer):
    """An error without a field: what went wrong for a person, and a code for a program."""

    detail = serializers.CharField(help_text="What went wrong, for a person to read.")
    code = serializers.CharField(
        help_text="A short machine-readable reason, e.g. `not_found`, `cap_daily`."
    )


class InvalidInputSerializer(serializers.Serializer):
    """Bad input: each field to fix maps to its messages (`{"name": ["..."]}`); a refusal not
    about one field is `{"detail": "...", "code": "..."}`."""

    detail = serializers.CharField(required=False, help_text="What went wrong, if no one field.")
    code = serializers.CharField(required=False, help_text="A machine-readable reason.")


class InvalidInputSchema(OpenApiSerializerExtension):
    """The field names are open: each other property is a field's list of messages."""

    target_class = InvalidInputSerializer

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target_class, direction, bypass_extensions=True)
        schema["additionalProperties"] = {"type": "array", "items": {"type": "string"}}
        return schema


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "belvedir.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A project API key: `Authorization: Bearer bv_live_…`.",
        }


class RunKeyScheme(OpenApiAuthenticationExtension):
    target_class = "belvedir.authentication.RunKeyAuthentication"
    name = "RunKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A run's own key (`BELVEDIR_API_KEY` inside its sandbox).",
        }


ERROR_DESCRIPTIONS = {
    400: "Bad input: the field named in the body says what to fix.",
    401: "No API key, or an unknown or revoked one.",
    402: "The organization's balance does not cover this.",
    403: "The caller may see this but not change it (a read-only member or a run key).",
    404: "No such object in the caller's project.",
    409: "The request reached the wrong place for the object's state; the message says where.",
    413: "The body is too large.",
    429: "A limit is reached; `Retry-After` says when to try again, when known.",
    503: "A dependency is busy; `Retry-After` says when to try again.",
}


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """The documented error answers for `statuses`, for `@extend_schema(responses=...)`."""
    return {
        status: OpenApiResponse(
            response=InvalidInputSerializer if status == 400 else ErrorSerializer,
            description=ERROR_DESCRIPTIONS[status],
        )
        for status in statuses
    }
