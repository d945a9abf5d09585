"""REST API for fine-tuned models: upload (multipart, streamed), list, read, delete.

`POST /api/v1/models` shares its path with the model router's OpenAI-compatible
`GET /api/v1/models` (belvedir/urls.py dispatches by method), so the list is
`GET /api/v1/models/fine-tuned`.
"""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, ListAPIView, get_paginated_response
from belvedir.errors import Invalid
from belvedir.schema import errors
from models_registry import adapters, services
from models_registry.models import FineTunedModel
from models_registry.selectors import fine_tuned_models_for


class FineTunedModelSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="email", read_only=True)

    class Meta:
        model = FineTunedModel
        fields = ["id", "name", "base_model", "gated", "adapter_size", "created_by", "created_at"]
        extra_kwargs = {"adapter_size": {"help_text": "The adapter zip's size in bytes."}}


class FineTunedModelUploadView(AccessMixin, APIView):
    parser_classes = [MultiPartParser, FormParser]

    def initialize_request(self, request, *args, **kwargs):
        # Before anything reads the body (a session's CSRF check reads the form).
        self.guard = adapters.guard_upload(request)
        return super().initialize_request(request, *args, **kwargs)

    # Documented by router.schema: the schema generator does not see this view behind the
    # method dispatch it shares with the router (which answers GET on the same path).
    def post(self, request):
        self.access.require_write()
        data = request.data  # the body streams through the guard into a temporary file
        if self.guard.exceeded:
            raise Invalid(adapters.too_large_message(self.guard.received), field="adapter")
        adapter = request.FILES.get("adapter")
        gated = str(data.get("gated", "")).strip().lower() in ("1", "true", "on", "yes")
        user = request.user if getattr(request.user, "pk", None) else None
        model = services.fine_tuned_model_create(
            project=self.access.project,
            name=data.get("name", ""),
            base_model=data.get("base_model", ""),
            adapter=adapter,
            gated=gated,
            created_by=user,
        )
        return Response(FineTunedModelSerializer(model).data, status=status.HTTP_201_CREATED)


class FineTunedModelListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="models_list",
        summary="List the project's fine-tuned models, newest first.",
        responses={200: FineTunedModelSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        return get_paginated_response(
            view=self,
            queryset=fine_tuned_models_for(project=self.access.project).select_related(
                "created_by"
            ),
            serializer_class=FineTunedModelSerializer,
        )


class FineTunedModelDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="models_read",
        summary="Read a fine-tuned model.",
        responses={200: FineTunedModelSerializer, **errors(401, 404)},
    )
    def get(self, request, model_id: str):
        return Response(FineTunedModelSerializer(self.access.get(FineTunedModel, pk=model_id)).data)

    @extend_schema(
        operation_id="models_delete",
        summary="Delete a fine-tuned model and its adapter file (its runs stay).",
        responses={204: OpenApiResponse(description="Deleted."), **errors(401, 403, 404)},
    )
    def delete(self, request, model_id: str):
        model = self.access.get(FineTunedModel, write=True, pk=model_id)
        services.fine_tuned_model_delete(model=model)
        return Response(status=status.HTTP_204_NO_CONTENT)
