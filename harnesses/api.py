"""REST API for harnesses and the catalog."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, ListAPIView, get_paginated_response
from belvedir.schema import errors
from harnesses import env_secrets, services
from harnesses.catalog import presets_by_group
from harnesses.models import Harness
from harnesses.selectors import harnesses_for


class HarnessSerializer(serializers.ModelSerializer):
    env = serializers.SerializerMethodField(
        help_text=f"Secret values (names ending _KEY, _TOKEN, _SECRET or holding PASSWORD) show as "
        f"{env_secrets.MASK}; send {env_secrets.MASK} back to keep one, a new value to replace it."
    )

    class Meta:
        model = Harness
        fields = [
            "id",
            *services.FIELDS,
            "environment",
            "environment_version",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "environment", "environment_version", "created_at", "updated_at"]
        extra_kwargs = {
            "environment": {"help_text": "The environment whose tasks this harness was made from."},
            "environment_version": {"help_text": "That environment's version, at the time."},
        }

    def get_env(self, harness: Harness) -> dict[str, str]:
        return services.harness_values(harness=harness)["env"]


class HarnessInputSerializer(serializers.Serializer):
    """A harness's fields; on an update, only the fields given change."""

    # Shape only: types are checked here, the rules in harnesses.services.

    name = serializers.CharField(required=False, allow_blank=True)
    repo_url = serializers.CharField(required=False, allow_blank=True)
    ref = serializers.CharField(required=False, allow_blank=True)
    install_command = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    run_command = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    env = serializers.JSONField(required=False)
    compute = serializers.CharField(required=False, allow_blank=True)
    gpu_type = serializers.CharField(required=False, allow_blank=True)
    tasks = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    preset = serializers.CharField(required=False, allow_blank=True)


def _input(request) -> dict:
    """The fields the request gave, as the services' keyword arguments."""
    data = HarnessInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class PresetSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    group = serializers.CharField()
    description = serializers.CharField()
    repo_url = serializers.CharField()
    install_command = serializers.CharField()
    run_command = serializers.CharField()
    env = serializers.DictField(child=serializers.CharField())
    ref = serializers.CharField()
    compute = serializers.CharField()
    gpu_type = serializers.CharField()
    tasks = serializers.CharField()
    available = serializers.BooleanField()


class CatalogGroupSerializer(serializers.Serializer):
    group = serializers.CharField()
    presets = PresetSerializer(many=True)


class CatalogSerializer(serializers.Serializer):
    groups = CatalogGroupSerializer(many=True)


class HarnessListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="harnesses_list",
        summary="List the project's harnesses.",
        responses={200: HarnessSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        harnesses = harnesses_for(project=self.access.project)
        return get_paginated_response(
            view=self, queryset=harnesses, serializer_class=HarnessSerializer
        )

    @extend_schema(
        operation_id="harnesses_create",
        summary="Register a harness: a git repo, its install and run commands, env and Tasks.",
        request=HarnessInputSerializer,
        responses={201: HarnessSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request):
        self.access.require_write()
        user = request.user if getattr(request.user, "pk", None) else None
        harness = services.harness_create(
            project=self.access.project, created_by=user, **_input(request)
        )
        return Response(HarnessSerializer(harness).data, status=status.HTTP_201_CREATED)


class HarnessDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="harnesses_read",
        summary="Read a harness.",
        responses={200: HarnessSerializer, **errors(401, 404)},
    )
    def get(self, request, harness_id: str):
        return Response(HarnessSerializer(self.access.get(Harness, pk=harness_id)).data)

    @extend_schema(
        operation_id="harnesses_update",
        summary="Change the given fields of a harness; runs already launched keep their copy.",
        request=HarnessInputSerializer,
        responses={200: HarnessSerializer, **errors(400, 401, 403, 404)},
    )
    def patch(self, request, harness_id: str):
        harness = self.access.get(Harness, write=True, pk=harness_id)
        harness = services.harness_update(harness=harness, **_input(request))
        return Response(HarnessSerializer(harness).data)

    @extend_schema(
        operation_id="harnesses_replace",
        summary="Change the given fields of a harness (the same as PATCH).",
        request=HarnessInputSerializer,
        responses={200: HarnessSerializer, **errors(400, 401, 403, 404)},
    )
    def put(self, request, harness_id: str):
        return self.patch(request, harness_id)

    @extend_schema(
        operation_id="harnesses_delete",
        summary="Delete a harness; its runs stay, with the harness's name.",
        responses={204: None, **errors(401, 403, 404)},
    )
    def delete(self, request, harness_id: str):
        harness = self.access.get(Harness, write=True, pk=harness_id)
        services.harness_delete(harness=harness)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CatalogView(AccessMixin, APIView):
    @extend_schema(
        operation_id="catalog_list",
        summary="The catalog of harness presets, by group, to prefill a new harness.",
        responses={200: CatalogSerializer, **errors(401)},
    )
    def get(self, request):
        groups = [
            {"group": group, "presets": [p.as_dict() for p in presets]}
            for group, presets in presets_by_group()
        ]
        return Response({"groups": groups})
