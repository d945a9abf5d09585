"""REST API for runs: launch, list, read, log, cancel; the Tasks file for the sandbox."""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, ListAPIView, get_paginated_response
from belvedir.authentication import RunKeyAuthentication
from belvedir.errors import Invalid, NotFound
from belvedir.run_access import own_run
from belvedir.schema import errors
from harnesses.environment_export import environment_export_response, tasks_export_response
from harnesses.models import Environment, Harness
from models_registry.models import FineTunedModel
from runs import selectors, services
from runs.models import MAX_ATTEMPTS, Grading, Run, Status


class RunSerializer(serializers.ModelSerializer):
    harness = serializers.CharField(source="harness_id", allow_null=True)
    has_model_api_key = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField(
        help_text="A queued run's place in its queue (1: next to start; GPU runs count only "
        "the runs of their GPU type ahead of them); null otherwise."
    )
    waiting_for = serializers.SerializerMethodField(
        help_text='What a queued GPU run waits for, e.g. "waiting for an A10G worker"; '
        "blank otherwise."
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "harness",
            "harness_name",
            "status",
            "queue_position",
            "waiting_for",
            "gpu_type",
            "gpu_device",
            "engine",
            "score",
            "score_stderr",
            "score_ci_low",
            "score_ci_high",
            "n_tasks",
            "score_interval_note",
            "results",
            "notes",
            "traces_incomplete",
            "log_tail",
            "model",
            "fine_tuned_model",
            "model_base",
            "model_api_base",
            "has_model_api_key",
            "judge_model",
            "judge_api_base",
            "model_api_base_resolved",
            "judge_api_base_resolved",
            "model_proxied",
            "judge_proxied",
            "covered",
            "covered_cap_micros",
            "covered_spent_micros",
            "attempts",
            "grading",
            "exit_code",
            "created_at",
            "started_at",
            "finished_at",
            "stage",
            "stage_started_at",
        ]

        extra_kwargs = {
            "fine_tuned_model": {
                "help_text": "The fine-tuned model the run was launched against (Models page)."
            },
            "model_base": {
                "help_text": "A fine-tuned model's base Hugging Face id (the sandbox's MODEL); "
                "`model` is then the fine-tuned model's name."
            },
            "model_api_base_resolved": {
                "help_text": "The model's base: the one given, inferred from the model id when "
                "blank, or the router for covered usage (the sandbox got it unless proxied)."
            },
            "judge_api_base_resolved": {"help_text": "The same for JUDGE_API_BASE."},
            "model_proxied": {"help_text": "Own-key usage went through the router."},
            "score_stderr": {
                "help_text": "The score's standard error over its per-task results (clustered "
                "by group when given; docs/harness-contract.md); null without at least 2."
            },
            "score_ci_low": {"help_text": "The low end of the score's 95% interval."},
            "score_ci_high": {"help_text": "The high end of the score's 95% interval."},
            "n_tasks": {
                "help_text": "How many tasks have a score in results.json's per-task results."
            },
            "score_interval_note": {
                "help_text": "Why a succeeded run's score has no interval, as its page says "
                "('results.json has no per-task results', …); blank when it has one."
            },
            "traces_incomplete": {
                "help_text": "Some of the run's spans never reached its session (the SDK or a "
                "driver said 'spans dropped' in its output, or the router could not store a "
                "call's span): its trace is short."
            },
            "covered": {
                "help_text": "Belvedir covers this run's model usage (its key was left blank)."
            },
            "covered_cap_micros": {
                "help_text": "The covered spend cap of the run, in micro-dollars."
            },
            "covered_spent_micros": {
                "help_text": "Covered model spend settled so far, in micro-dollars."
            },
            "gpu_type": {"help_text": "A GPU run's GPU type (its queue); blank for CPU runs."},
            "engine": {
                "help_text": "The worker host and Docker engine the run was claimed on "
                "(`host unix:///var/run/docker.sock`); blank before it started."
            },
            "gpu_device": {
                "help_text": "The GPU device a GPU run got (worker host/device id), once started."
            },
        }

    def get_has_model_api_key(self, run: Run) -> bool:
        return bool(run.model_api_key_encrypted)

    def get_queue_position(self, run: Run) -> int | None:
        return selectors.queue_position(run)

    def get_waiting_for(self, run: Run) -> str:
        return selectors.waiting_for(run)


class RunLaunchSerializer(serializers.Serializer):
    harness = serializers.CharField()
    model = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    model_api_base = serializers.CharField(
        required=False, allow_blank=True, max_length=500, default=""
    )
    model_api_key = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, default="", write_only=True
    )
    judge_model = serializers.CharField(
        required=False, allow_blank=True, max_length=200, default=""
    )
    judge_api_base = serializers.CharField(
        required=False, allow_blank=True, max_length=500, default=""
    )
    judge_api_key = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, default="", write_only=True
    )
    attempts = serializers.IntegerField(
        required=False, default=1, min_value=1, max_value=MAX_ATTEMPTS
    )
    grading = serializers.ChoiceField(
        choices=Grading.values, required=False, default=Grading.PASS_AT_1
    )


class RunLogSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The log from `offset` on, as far as the tail holds it.")
    offset = serializers.IntegerField(help_text="Where the log ends now: the next `offset`.")
    status = serializers.ChoiceField(choices=Status.choices)
    truncated = serializers.BooleanField(
        help_text="True when the log from `offset` has already left the 16 KB tail."
    )


class RunListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="runs_list",
        summary="List the project's runs, newest first.",
        parameters=[
            OpenApiParameter("harness", str, description="Only runs of this harness id."),
            OpenApiParameter("status", str, enum=Status.values, description="Only this status."),
            OpenApiParameter("model", str, description="Only runs of this model."),
        ],
        responses={200: RunSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        runs = selectors.runs_for(
            project=self.access.project,
            harness=request.query_params.get("harness"),
            status=request.query_params.get("status"),
            model=request.query_params.get("model"),
        )
        return get_paginated_response(view=self, queryset=runs, serializer_class=RunSerializer)

    @extend_schema(
        operation_id="runs_launch",
        summary="Launch a run of a harness; it is queued for a sandbox at once.",
        request=RunLaunchSerializer,
        responses={201: RunSerializer, **errors(400, 401, 402, 403, 404, 429, 503)},
    )
    def post(self, request):
        self.access.require_write()
        data = RunLaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        harness = self.access.scope(Harness).filter(pk=values.pop("harness")).first()
        if harness is None:
            raise Invalid("No such harness in this project.", field="harness")
        user = request.user if getattr(request.user, "pk", None) else None
        run = services.run_launch(
            project=harness.project, harness=harness, created_by=user, **values
        )
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class RunDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="runs_read",
        summary="Read a run: its status, score, results and the tail of its log.",
        responses={200: RunSerializer, **errors(401, 404)},
    )
    def get(self, request, run_id: str):
        return Response(RunSerializer(self.access.get(Run, pk=run_id)).data)


class RunCancelView(AccessMixin, APIView):
    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel a queued or running run; its sandbox is stopped within seconds.",
        request=None,
        responses={200: RunSerializer, **errors(400, 401, 403, 404)},
    )
    def post(self, request, run_id: str):
        run = self.access.get(Run, write=True, pk=run_id)
        return Response(RunSerializer(services.run_cancel(run=run)).data)


class RunLogView(AccessMixin, APIView):
    """The log from byte `offset` on, as far as the 16 KB tail still holds it."""

    @extend_schema(
        operation_id="runs_log",
        summary="Follow a run's log: the text after byte `offset`.",
        parameters=[
            OpenApiParameter(
                "offset", int, description="Byte offset to read from (the last answer's offset)."
            )
        ],
        responses={200: RunLogSerializer, **errors(400, 401, 404)},
    )
    def get(self, request, run_id: str):
        run = self.access.get(Run, pk=run_id)
        try:
            offset = max(0, int(request.query_params.get("offset", 0)))
        except ValueError:
            raise Invalid("offset must be a whole number.", field="offset") from None
        return Response(selectors.log_since(run, offset))


class RunTasksView(APIView):
    """The run's Tasks file, for its sandbox: only with that run's own key."""

    authentication_classes = [RunKeyAuthentication]

    @extend_schema(
        operation_id="runs_tasks",
        summary="Download a run's Tasks file, with that run's own key (from its sandbox).",
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="The Tasks file."),
            **errors(401, 403, 404),
        },
    )
    def get(self, request, run_id: str):
        _, tasks = _own_runs_tasks(request, run_id)
        return HttpResponse(tasks.encode(), content_type="text/plain; charset=utf-8")


def _own_runs_tasks(request, run_id: str) -> tuple[Run, str]:
    """The run whose own key the request carries, and its Tasks field (a 404 without)."""
    run = own_run(
        request, run_id=run_id, refuse="Only the run's own key can download its Tasks file."
    )
    tasks = run.harness_snapshot.get("tasks") or ""
    if not tasks:
        raise NotFound("This run has no Tasks.")
    return run, tasks


# A Harbor export's query and answer (the run's Tasks, an environment).
_EXPORT_LIMIT = OpenApiParameter(
    "limit", int, required=False, description="Only the first N tasks."
)
_EXPORT_ZIP = {
    (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The zip, streamed.")
}


class RunTasksExportView(APIView):
    """The run's Tasks field as a Harbor dataset (the environments' export code): what the
    Harbor driver runs for a Harbor harness with Tasks and no HARBOR_DATASET. Only with that
    run's own key."""

    authentication_classes = [RunKeyAuthentication]

    @extend_schema(
        operation_id="runs_tasks_export",
        summary="A run's Tasks as a Harbor dataset (a zip), with that run's own key.",
        parameters=[_EXPORT_LIMIT],
        responses={**_EXPORT_ZIP, **errors(400, 401, 403, 404)},
    )
    def get(self, request, run_id: str):
        run, tasks = _own_runs_tasks(request, run_id)
        return tasks_export_response(
            tasks_text=tasks,
            name=run.harness_name or "tasks",
            key=run.pk,
            limit=request.query_params.get("limit"),
            metadata={"run": run.pk, "harness_name": run.harness_name},
        )


class RunEnvironmentExportView(AccessMixin, APIView):
    """The environment export (harnesses' `environment_export_response`, as the environment
    page's export), served to project keys and members, and to a run's own key for the
    environments its run names only (`selectors.run_environment_ids`): the Harbor driver
    fetches `HARBOR_DATASET=belvedir:<id>` from the run's sandbox. Any other environment is a
    404 for that key, as another project's is. It lives with runs, above harnesses: only runs
    know which run a key belongs to and what its harness names."""

    authentication_classes = [RunKeyAuthentication, SessionAuthentication]

    @extend_schema(
        operation_id="environments_export",
        summary="The environment as a Harbor dataset: a zip of one task directory per task.",
        description=(
            "Each task directory holds instruction.md, task.toml, environment/Dockerfile, "
            "tests/test.sh and solution/solve.sh (docs/harbor.md). "
            "The judge's key is never in it: task.toml reads JUDGE_API_KEY where Harbor runs. "
            "A run's own key may fetch only the environment its run's harness names "
            "(HARBOR_DATASET=belvedir:<id>, or the environment the harness was made from); "
            "any other is a 404 for it."
        ),
        parameters=[_EXPORT_LIMIT],
        responses={**_EXPORT_ZIP, **errors(400, 401, 404)},
    )
    def get(self, request, environment_id: str):
        run = own_run(request)
        if run is not None and environment_id not in selectors.run_environment_ids(run):
            raise NotFound("Not found.")
        environment = self.access.get(Environment, pk=environment_id)
        return environment_export_response(
            environment=environment, limit=request.query_params.get("limit")
        )


class ModelRunLaunchSerializer(serializers.Serializer):
    harness = serializers.CharField(help_text="A GPU harness of the model's project.")
    attempts = serializers.IntegerField(
        required=False, default=1, min_value=1, max_value=MAX_ATTEMPTS
    )
    grading = serializers.ChoiceField(
        choices=Grading.values, required=False, default=Grading.PASS_AT_1
    )


class ModelRunLaunchView(AccessMixin, APIView):
    @extend_schema(
        operation_id="models_run",
        summary="Run benchmark: launch a GPU harness against a fine-tuned model.",
        description="The sandbox gets MODEL (the base id), ADAPTER_URL (a signed link to the "
        "adapter zip, valid for this run while it runs), MODEL_LABEL (the model's name, "
        "recorded as results.model) and HF_TOKEN for a gated base.",
        request=ModelRunLaunchSerializer,
        responses={201: RunSerializer, **errors(400, 401, 403, 404, 429)},
    )
    def post(self, request, model_id: str):
        fine_tuned = self.access.get(FineTunedModel, write=True, pk=model_id)
        data = ModelRunLaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        harness = Harness.objects.filter(
            project=fine_tuned.project, pk=values.pop("harness")
        ).first()
        if harness is None:
            raise Invalid("No such harness in the model's project.", field="harness")
        user = request.user if getattr(request.user, "pk", None) else None
        run = services.run_launch_fine_tuned(
            fine_tuned_model=fine_tuned, harness=harness, created_by=user, **values
        )
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class ModelBenchmarksView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="models_benchmarks",
        summary="A fine-tuned model's runs (its View benchmarks panel), newest first.",
        description="Runs launched against the model, and any run of its project whose "
        "results.model is the model's name.",
        responses={200: RunSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request, model_id: str):
        fine_tuned = self.access.get(FineTunedModel, pk=model_id)
        return get_paginated_response(
            view=self,
            queryset=selectors.runs_of_fine_tuned_model(fine_tuned),
            serializer_class=RunSerializer,
        )
