"""Shared REST API pieces: pagination, error shape, the access-aware base view."""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, pagination, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from belvedir.access import Access, access_for_request
from belvedir.errors import DomainError


class Pagination(pagination.LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        if exc.code.startswith("cap_"):
            code = status.HTTP_429_TOO_MANY_REQUESTS
        elif exc.code == "unavailable":  # the platform cannot do it now; not the caller's fault
            code = status.HTTP_503_SERVICE_UNAVAILABLE
        else:
            code = status.HTTP_400_BAD_REQUEST
        return Response(exc.as_dict(), status=code)
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    return drf_exception_handler(exc, context)


class AccessMixin:
    """Gives API views `self.access`, resolved through the one scoping helper."""

    @property
    def access(self) -> Access:
        return access_for_request(self.request)


# --- API keys --------------------------------------------------------------

from rest_framework import serializers  # noqa: E402
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
        keys = self.access.scope(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT)).filter(
            project=self.access.project
        )
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
