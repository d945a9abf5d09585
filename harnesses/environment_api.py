"""REST API for environments (task sets): list, create, read, update (a new version), delete,
and a harness backed by one."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, ListAPIView, get_paginated_response
from belvedir.errors import Invalid
from belvedir.schema import errors
from harnesses import environments, generation
from harnesses.api import HarnessSerializer
from harnesses.models import Environment, EnvironmentGeneration, EnvironmentVersion
from harnesses.selectors import environments_for

TASKS_HELP = (
    "A list of task objects {id, prompt, answer, verifier, metadata} (docs/tasks-format.md), "
    "or a tasks file's text (JSON list, JSONL, or plain text lines: judge tasks)."
)


class EnvironmentSerializer(serializers.ModelSerializer):
    class Meta:
        model = Environment
        fields = [
            "id",
            "name",
            "description",
            "version",
            "task_count",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class EnvironmentDetailSerializer(EnvironmentSerializer):
    tasks = serializers.SerializerMethodField(help_text="The tasks of this version.")

    class Meta(EnvironmentSerializer.Meta):
        fields = [*EnvironmentSerializer.Meta.fields, "tasks"]
        read_only_fields = fields

    def get_tasks(self, environment: Environment) -> list[dict]:
        return environments.environment_tasks(
            environment=environment, number=self.context.get("version")
        )


class EnvironmentVersionSerializer(serializers.ModelSerializer):
    task_count = serializers.SerializerMethodField()

    class Meta:
        model = EnvironmentVersion
        fields = ["number", "name", "description", "task_count", "created_at"]

    def get_task_count(self, version: EnvironmentVersion) -> int:
        return len(version.tasks)


class EnvironmentInputSerializer(serializers.Serializer):
    """Shape only: the rules are harnesses.environments' and harnesses.tasks_format's."""

    name = serializers.CharField(required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    tasks = serializers.JSONField(required=False, help_text=TASKS_HELP)


class EnvironmentHarnessSerializer(serializers.Serializer):
    preset = serializers.CharField(
        help_text="The catalog card: runner (Belvedir Runner) or harbor-runner (on Harbor)."
    )
    name = serializers.CharField(required=False, allow_blank=True)


def _input(request) -> dict:
    data = EnvironmentInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


def _user(request):
    return request.user if getattr(request.user, "pk", None) else None


class EnvironmentListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="environments_list",
        summary="List the project's environments (task sets), most recently changed first.",
        responses={200: EnvironmentSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        return get_paginated_response(
            view=self,
            queryset=environments_for(project=self.access.project),
            serializer_class=EnvironmentSerializer,
        )

    @extend_schema(
        operation_id="environments_create",
        summary="Create an environment from its name, description and tasks (version 1).",
        request=EnvironmentInputSerializer,
        responses={201: EnvironmentDetailSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request):
        self.access.require_write()
        given = _input(request)
        if "tasks" not in given:
            raise Invalid("tasks is required.", field="tasks")
        environment = environments.environment_create(
            project=self.access.project,
            created_by=_user(request),
            name=given.get("name", ""),
            description=given.get("description", ""),
            tasks=given["tasks"],
        )
        return Response(
            EnvironmentDetailSerializer(environment).data, status=status.HTTP_201_CREATED
        )


def _version_param(request) -> int | None:
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    try:
        number = int(raw)
    except ValueError:
        raise Invalid("version must be a version number.", field="version") from None
    if number < 1:
        raise Invalid("version must be a version number.", field="version")
    return number


class EnvironmentDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="environments_read",
        summary="Read an environment with its tasks (the current version, or ?version=N).",
        parameters=[OpenApiParameter("version", int, required=False)],
        responses={200: EnvironmentDetailSerializer, **errors(400, 401, 404)},
    )
    def get(self, request, environment_id: str):
        environment = self.access.get(Environment, pk=environment_id)
        number = _version_param(request)
        if number is not None and not environment.versions.filter(number=number).exists():
            raise Invalid(f"This environment has no version {number}.", field="version")
        serializer = EnvironmentDetailSerializer(environment, context={"version": number})
        return Response(serializer.data)

    @extend_schema(
        operation_id="environments_update",
        summary="Change the given fields; any change makes a new version.",
        request=EnvironmentInputSerializer,
        responses={200: EnvironmentDetailSerializer, **errors(400, 401, 403, 404)},
    )
    def patch(self, request, environment_id: str):
        environment = self.access.get(Environment, write=True, pk=environment_id)
        environment = environments.environment_update(
            environment=environment, updated_by=_user(request), **_input(request)
        )
        return Response(EnvironmentDetailSerializer(environment).data)

    @extend_schema(
        operation_id="environments_replace",
        summary="Change the given fields (the same as PATCH).",
        request=EnvironmentInputSerializer,
        responses={200: EnvironmentDetailSerializer, **errors(400, 401, 403, 404)},
    )
    def put(self, request, environment_id: str):
        return self.patch(request, environment_id)

    @extend_schema(
        operation_id="environments_delete",
        summary="Delete an environment and its versions; harnesses made from it keep their Tasks.",
        responses={204: None, **errors(401, 403, 404)},
    )
    def delete(self, request, environment_id: str):
        environment = self.access.get(Environment, write=True, pk=environment_id)
        environments.environment_delete(environment=environment)
        return Response(status=status.HTTP_204_NO_CONTENT)


class EnvironmentVersionListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="environments_versions",
        summary="An environment's versions, newest first.",
        responses={200: EnvironmentVersionSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request, environment_id: str):
        environment = self.access.get(Environment, pk=environment_id)
        return get_paginated_response(
            view=self,
            queryset=environment.versions.all(),
            serializer_class=EnvironmentVersionSerializer,
        )


class EnvironmentHarnessView(AccessMixin, APIView):
    @extend_schema(
        operation_id="environments_harness_create",
        summary="Create a harness from a catalog card with its Tasks filled from the environment.",
        request=EnvironmentHarnessSerializer,
        responses={201: HarnessSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request, environment_id: str):
        environment = self.access.get(Environment, write=True, pk=environment_id)
        data = EnvironmentHarnessSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        harness = environments.environment_harness_create(
            environment=environment,
            preset=data.validated_data["preset"],
            name=data.validated_data.get("name") or None,
            created_by=_user(request),
        )
        return Response(HarnessSerializer(harness).data, status=status.HTTP_201_CREATED)


# --- generation -----------------------------------------------------------------------------


class GenerationSerializer(serializers.ModelSerializer):
    # Text, not an enum: a second `status` choice set would rename the runs' StatusEnum.
    status = serializers.CharField(read_only=True, help_text="queued, running, succeeded or failed")
    model_api_base = serializers.CharField(source="api_base", read_only=True)
    environment = serializers.CharField(source="environment_id", read_only=True, allow_null=True)

    class Meta:
        model = EnvironmentGeneration
        fields = [
            "id",
            "status",
            "progress",
            "name",
            "description",
            "count",
            "model",
            "model_api_base",
            "covered",
            "preset",
            "tasks",
            "error",
            "environment",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class GenerateInputSerializer(serializers.Serializer):
    """Shape only: the rules are harnesses.generation's."""

    description = serializers.CharField(help_text="What the tasks should test.")
    name = serializers.CharField(required=False, allow_blank=True)
    count = serializers.IntegerField(required=False, help_text="How many tasks (1 to 50; 5).")
    model = serializers.CharField()
    model_api_base = serializers.CharField(required=False, allow_blank=True)
    model_api_key = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Your key for the model; blank for a model the platform covers.",
    )
    preset = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The card of the harness made when the tasks are saved: runner or harbor-runner.",
    )


class GenerationSaveSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    tasks = serializers.JSONField(required=False, help_text="The previewed tasks as edited.")
    preset = serializers.CharField(required=False, allow_blank=True)


class GenerationSavedSerializer(serializers.Serializer):
    environment = EnvironmentDetailSerializer()
    harness = HarnessSerializer(allow_null=True)


class EnvironmentGenerateView(AccessMixin, APIView):
    @extend_schema(
        operation_id="environments_generate",
        summary="Generate an environment's tasks from a description with a model: a background "
        "job whose tasks are a preview until saved.",
        request=GenerateInputSerializer,
        responses={202: GenerationSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request):
        self.access.require_write()
        data = GenerateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        generation_row = generation.generation_start(
            project=self.access.project, created_by=_user(request), **data.validated_data
        )
        return Response(GenerationSerializer(generation_row).data, status=status.HTTP_202_ACCEPTED)


class GenerationDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="environments_generation_read",
        summary="A generation's status, progress and, once done, its tasks or its error.",
        responses={200: GenerationSerializer, **errors(401, 404)},
    )
    def get(self, request, generation_id: str):
        row = self.access.get(EnvironmentGeneration, pk=generation_id)
        row = generation.generation_check_stale(generation=row)
        return Response(GenerationSerializer(row).data)


class GenerationSaveView(AccessMixin, APIView):
    @extend_schema(
        operation_id="environments_generation_save",
        summary="Save a generation's tasks (as previewed, or edited) as an environment, and a "
        "harness from the card picked.",
        request=GenerationSaveSerializer,
        responses={201: GenerationSavedSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request, generation_id: str):
        row = self.access.get(EnvironmentGeneration, write=True, pk=generation_id)
        data = GenerationSaveSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        environment, harness = generation.generation_save(
            generation=row, created_by=_user(request), **data.validated_data
        )
        body = {
            "environment": EnvironmentDetailSerializer(environment).data,
            "harness": HarnessSerializer(harness).data if harness else None,
        }
        return Response(body, status=status.HTTP_201_CREATED)
