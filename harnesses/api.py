"""REST API for harnesses and the catalog."""

from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, Pagination
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
        fields = ["id", *services.FIELDS, "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]

    def get_env(self, harness: Harness) -> dict[str, str]:
        return services.harness_values(harness=harness)["env"]


class HarnessInputSerializer(serializers.Serializer):
    """Shape only: types are checked here, rules in harnesses.services."""

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


class HarnessListView(AccessMixin, APIView):
    def get(self, request):
        harnesses = harnesses_for(project=self.access.project)
        page = Pagination()
        rows = page.paginate_queryset(harnesses, request, view=self)
        return page.get_paginated_response(HarnessSerializer(rows, many=True).data)

    def post(self, request):
        self.access.require_write()
        user = request.user if getattr(request.user, "pk", None) else None
        harness = services.harness_create(
            project=self.access.project, created_by=user, **_input(request)
        )
        return Response(HarnessSerializer(harness).data, status=status.HTTP_201_CREATED)


class HarnessDetailView(AccessMixin, APIView):
    def get(self, request, harness_id: str):
        return Response(HarnessSerializer(self.access.get(Harness, pk=harness_id)).data)

    def patch(self, request, harness_id: str):
        harness = self.access.get(Harness, write=True, pk=harness_id)
        harness = services.harness_update(harness=harness, **_input(request))
        return Response(HarnessSerializer(harness).data)

    put = patch

    def delete(self, request, harness_id: str):
        harness = self.access.get(Harness, write=True, pk=harness_id)
        services.harness_delete(harness=harness)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CatalogView(AccessMixin, APIView):
    def get(self, request):
        groups = [
            {"group": group, "presets": [p.as_dict() for p in presets]}
            for group, presets in presets_by_group()
        ]
        return Response({"groups": groups})
