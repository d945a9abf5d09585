"""Shared REST API pieces: pagination, error shape, the access-aware base view."""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, pagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from belvedir.access import Access, access_for_request
from belvedir.error_responses import body_of, headers_of, status_of
from belvedir.errors import DomainError, Forbidden, NotFound


class Pagination(pagination.LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


def exception_handler(exc, context):
    """Domain errors by the one table in belvedir.error_responses; DRF's own errors as DRF
    answers them, with their `code` beside a string `detail`."""
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

from rest_framework import serializers, status  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

from belvedir import services  # noqa: E402
from belvedir.models import ApiKey  # noqa: E402


class ApiKeySerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]


class ApiKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=120)


class ApiKeyListView(AccessMixin, APIView):
    def get(self, request):
        keys = self.access.scoped(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT))
        page = Pagination()
        rows = page.paginate_queryset(keys, request, view=self)
        return page.get_paginated_response(ApiKeySerializer(rows, many=True).data)

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
    def get(self, request, key_id: str):
        key = self.access.get(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT), pk=key_id)
        return Response(ApiKeySerializer(key).data)

    def delete(self, request, key_id: str):
        key = self.access.get(
            ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT), write=True, pk=key_id
        )
        services.api_key_revoke(key=key)
        return Response(ApiKeySerializer(key).data)
