"""Shared REST API pieces: the error answers, the access-aware base view; API keys.

Pagination (`get_paginated_response`) lives in belvedir.pagination, imported here for the apps.
"""

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from belvedir import services
from belvedir.access import Access, access_for_request
from belvedir.error_responses import body_of, headers_of, status_of
from belvedir.errors import DomainError, Forbidden, Invalid, NotFound, TooLarge
from belvedir.models import ApiKey, Project
from belvedir.pagination import ListAPIView, Pagination, get_paginated_response
from belvedir.schema import errors

__all__ = [
    "AccessMixin",
    "ListAPIView",
    "Pagination",
    "exception_handler",
    "get_paginated_response",
]


def _body_error(exc) -> DomainError | None:
    """Django's refusals of a request's body, which DRF would let through as 500s: 413 for one
    past DATA_UPLOAD_MAX_MEMORY_SIZE, 400 for too many form fields or files."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 2**20
        return TooLarge(
            f"The request body is over {limit:g} MB, the most the API takes.",
            code="body_too_large",
        )
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return Invalid(str(exc) or "The request has too many fields or files.", code="too_many")
    return None


def exception_handler(exc, context):
    """Domain errors by the one table in belvedir.error_responses; DRF's own errors as DRF
    answers them, with their `code` beside a string `detail`; a body Django refuses as too big
    by the table too (`_body_error`)."""
    exc = _body_error(exc) or exc
    if isinstance(exc, Http404) and not isinstance(exc, DomainError):
        exc = NotFound("Not found.")
    if isinstance(exc, DjangoPermissionDenied) and not isinstance(exc, DomainError):
        exc = Forbidden(str(exc) or "You do not have permission to do this.")
    if isinstance(exc, DomainError):
        return Response(body_of(exc), status=status_of(exc), headers=headers_of(exc))
    response = drf_exception_handler(exc, context)
    if (
        response is not None
        and isinstance(exc, exceptions.APIException)
        and isinstance(response.data, dict)
        and isinstance(response.data.get("detail"), str)
    ):
        response.data["code"] = exc.get_codes()
    return response


class AccessMixin:
    """Gives API views `self.access`, resolved through the one scoping helper."""

    @property
    def access(self) -> Access:
        return access_for_request(self.request)


# --- API keys --------------------------------------------------------------


class ApiKeySerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="The key itself: shown this once, never again.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]


class ApiKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=120)


class ApiKeyListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="keys_list",
        summary="List the project's API keys (prefixes only, never the keys).",
        responses={200: ApiKeySerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        keys = self.access.scoped(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT))
        return get_paginated_response(view=self, queryset=keys, serializer_class=ApiKeySerializer)

    @extend_schema(
        operation_id="keys_create",
        summary="Create a project API key; the answer holds the key, shown only this once.",
        request=ApiKeyCreateSerializer,
        responses={201: ApiKeyCreatedSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request):
        self.access.require_write()
        data = ApiKeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = request.user if getattr(request.user, "pk", None) else None
        key, plaintext = services.api_key_create(
            project=self.access.project, name=data.validated_data["name"], created_by=user
        )
        body = ApiKeySerializer(key).data | {"key": plaintext}
        return Response(body, status=status.HTTP_201_CREATED)


class ApiKeyDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="keys_read",
        summary="Read one API key's name, prefix and use.",
        responses={200: ApiKeySerializer, **errors(401, 404)},
    )
    def get(self, request, key_id: str):
        key = self.access.get(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT), pk=key_id)
        return Response(ApiKeySerializer(key).data)

    @extend_schema(
        operation_id="keys_revoke",
        summary="Revoke an API key; it stops working at once.",
        responses={200: ApiKeySerializer, **errors(401, 403, 404)},
    )
    def delete(self, request, key_id: str):
        key = self.access.get(
            ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT), write=True, pk=key_id
        )
        services.api_key_revoke(key=key)
        return Response(ApiKeySerializer(key).data)


# --- the project ------------------------------------------------------------


class ProjectSerializer(serializers.ModelSerializer):
    organization = serializers.CharField(source="organization_id", read_only=True)

    class Meta:
        model = Project
        fields = ["id", "name", "organization", "chinese_models_allowed", "created_at"]
        read_only_fields = ["id", "name", "created_at"]


class ProjectUpdateSerializer(serializers.Serializer):
    chinese_models_allowed = serializers.BooleanField(
        help_text="Covered runs (model key left blank) may use models of Chinese labs."
    )


class ProjectView(AccessMixin, APIView):
    @extend_schema(
        operation_id="project_read",
        summary="Read the current project (the key's project) and its settings.",
        responses={200: ProjectSerializer, **errors(401, 404)},
    )
    def get(self, request):
        return Response(ProjectSerializer(self.access.project).data)

    @extend_schema(
        operation_id="project_update",
        summary="Change the project's settings (owners and admins): Chinese models for covered runs.",
        request=ProjectUpdateSerializer,
        responses={200: ProjectSerializer, **errors(400, 401, 403, 404)},
    )
    def patch(self, request):
        access = self.access
        access.require_manage()
        data = ProjectUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = request.user if getattr(request.user, "pk", None) else access.api_key
        project = services.project_settings_update(
            project=access.project,
            chinese_models_allowed=data.validated_data["chinese_models_allowed"],
            actor=user,
        )
        return Response(ProjectSerializer(project).data)
