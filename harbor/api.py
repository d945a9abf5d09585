"""The task-sandbox API of the managed Harbor workspace (docs/task-sandboxes.md): called from a
managed Harbor run's sandbox, through the sandbox gateway, with the run's own key.

Everything that touches a container (create, exec, files, stop) answers only on the run's own
engine, 409 `wrong_host` elsewhere (`containers.require_this_engine`); reading the rows
works on any platform process."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.access import access_for_request
from belvedir.authentication import RunKeyAuthentication
from belvedir.errors import Invalid, NotFound, Unavailable
from belvedir.files import ThreadedStreamingResponse
from belvedir.pagination import ListAPIView, get_paginated_response
from belvedir.parsers import JSONParser
from belvedir.run_access import own_run
from belvedir.sandbox_config import get_backend
from belvedir.schema import errors
from belvedir.text import size_text
from harbor import services
from harbor.containers import require_this_engine
from harbor.models import TaskSandbox
from runs.models import Run
from sandboxes import taskfiles
from sandboxes.base import SandboxBackend, SandboxError, SandboxHandle

USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
CONTEXT_MAX_BYTES = settings.BELVEDIR_TASK_SANDBOX_CONTEXT_MAX_BYTES
UPLOAD_MAX_BYTES = settings.BELVEDIR_TASK_SANDBOX_UPLOAD_MAX_BYTES
DOWNLOAD_MAX_BYTES = 256 * 2**20


class TaskSandboxSerializer(serializers.ModelSerializer):
    run = serializers.CharField(source="run_id")

    class Meta:
        model = TaskSandbox
        fields = [
            "id",
            "run",
            "name",
            "status",
            "image",
            "cached",
            "error",
            "created_at",
            "started_at",
            "stopped_at",
            "charged_micros",
        ]


class TaskSandboxCreateSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The task's name.")
    context = serializers.FileField(help_text="The task's environment/ directory, a tar(.gz).")
    force_build = serializers.BooleanField(
        required=False, help_text="Build the image again, without the cache."
    )


class ExecSerializer(serializers.Serializer):
    command = serializers.CharField(trim_whitespace=False)
    cwd = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    timeout_sec = serializers.FloatField(required=False, allow_null=True, min_value=1)
    user = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)


def _run_of(request) -> Run:
    return own_run(
        request, refuse="Task sandboxes answer the run's own key only.", code="not_managed"
    )


def _sandbox_of(request, sandbox_id: str, *, on_engine: bool = False) -> TaskSandbox:
    """The run's task sandbox; `on_engine`: only on the run's own engine (its container)."""
    run = _run_of(request)
    sandbox = TaskSandbox.objects.filter(pk=sandbox_id, run=run).first()
    if sandbox is None:
        raise NotFound("No such task sandbox of this run.")
    if on_engine:
        require_this_engine(run)
    return sandbox


def _running(sandbox: TaskSandbox) -> None:
    if sandbox.status != TaskSandbox.Status.RUNNING:
        why = f": {sandbox.error}" if sandbox.error else "."
        raise Invalid(f"The task sandbox is {sandbox.status}{why}", field="id", code="not_running")


def _path(request) -> str:
    path = request.query_params.get("path") or ""
    if not path.startswith("/") or "\0" in path:
        raise Invalid("path must be an absolute path in the task sandbox.", field="path")
    return path


def _backend() -> SandboxBackend:
    backend = get_backend()
    try:
        backend.ping()
    except SandboxError as exc:
        raise Unavailable(f"The sandbox engine does not answer: {exc}", retry_after=30) from None
    return backend


def _handle(sandbox: TaskSandbox) -> SandboxHandle:
    return SandboxHandle(id=sandbox.container_id, run_id=sandbox.run_id)


class TaskSandboxCreateView(APIView):
    authentication_classes = [RunKeyAuthentication]
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="task_sandboxes_create",
        summary="Build a task's image and start its task sandbox (a managed Harbor run's key).",
        request={"multipart/form-data": TaskSandboxCreateSerializer},
        responses={201: TaskSandboxSerializer, **errors(400, 401, 402, 403, 409, 429, 503)},
    )
    def post(self, request):
        run = _run_of(request)
        upload = request.FILES.get("context")
        if upload is None:
            raise Invalid(
                "context is required: the task's environment/ as a tar.gz.", field="context"
            )
        if upload.size > CONTEXT_MAX_BYTES:
            raise Invalid(
                f"context is over {size_text(CONTEXT_MAX_BYTES, iec=False)}.", field="context"
            )
        folder = Path(tempfile.mkdtemp(prefix="belvedir-task-context-"))
        try:
            context = folder / "context.tar"
            with context.open("wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
            sandbox = services.task_sandbox_create(
                run=run,
                name=str(request.data.get("name") or ""),
                context=context,
                force_build=str(request.data.get("force_build") or "").lower()
                in ("1", "true", "yes", "on"),
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return Response(TaskSandboxSerializer(sandbox).data, status=status.HTTP_201_CREATED)


class TaskSandboxDetailView(APIView):
    authentication_classes = [RunKeyAuthentication]

    @extend_schema(
        operation_id="task_sandboxes_read",
        summary="Read one of the run's task sandboxes.",
        responses={200: TaskSandboxSerializer, **errors(401, 403, 404)},
    )
    def get(self, request, sandbox_id: str):
        return Response(TaskSandboxSerializer(_sandbox_of(request, sandbox_id)).data)

    @extend_schema(
        operation_id="task_sandboxes_stop",
        summary="Stop a task sandbox: kill and remove its container, settle its time.",
        responses={200: TaskSandboxSerializer, **errors(401, 403, 404, 409)},
    )
    def delete(self, request, sandbox_id: str):
        sandbox = _sandbox_of(request, sandbox_id, on_engine=True)
        sandbox = services.task_sandbox_stop(sandbox=sandbox)
        return Response(TaskSandboxSerializer(sandbox).data)


class TaskSandboxExecView(APIView):
    authentication_classes = [RunKeyAuthentication]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="task_sandboxes_exec",
        summary="Run a command in a task sandbox; its output streams back as NDJSON lines.",
        request=ExecSerializer,
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR,
                description='Lines {"stream","data"}, {"heartbeat"}, last {"exit_code","timed_out"}.',
            ),
            **errors(400, 401, 403, 404, 409),
        },
    )
    def post(self, request, sandbox_id: str):
        sandbox = _sandbox_of(request, sandbox_id, on_engine=True)
        _running(sandbox)
        data = ExecSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        cwd = values.get("cwd") or None
        if cwd is not None and not cwd.startswith("/"):
            raise Invalid("cwd must be an absolute path.", field="cwd")
        user = str(values.get("user") or "")
        if user and not USER.match(user):
            raise Invalid("user must be a user name or uid (optionally :group).", field="user")
        limit = settings.BELVEDIR_RUN_TIMEOUT
        timeout = values.get("timeout_sec") or limit  # null: as long as the run may take
        if timeout > limit:
            raise Invalid(f"timeout_sec must be at most the run's {limit} s.", field="timeout_sec")
        events = _backend().exec_stream(
            _handle(sandbox),
            command=values["command"],
            cwd=cwd,
            env=dict(values.get("env") or {}),
            timeout=float(timeout),
            user=user,
        )
        lines = (json.dumps(event).encode() + b"\n" for event in events)
        response = ThreadedStreamingResponse(lines, content_type="application/x-ndjson")
        response["X-Accel-Buffering"] = "no"
        response["Cache-Control"] = "no-cache"
        return response


class TaskSandboxFilesView(APIView):
    authentication_classes = [RunKeyAuthentication]
    parser_classes: list = []  # the body is a tar stream, read as it comes

    @extend_schema(
        operation_id="task_sandboxes_upload",
        summary="Extract a tar (the request body) into a directory of a task sandbox.",
        parameters=[OpenApiParameter("path", str, required=True, description="Absolute dir.")],
        request={"application/x-tar": OpenApiTypes.BINARY},
        responses={204: None, **errors(400, 401, 403, 404, 409, 413)},
    )
    def put(self, request, sandbox_id: str):
        sandbox = _sandbox_of(request, sandbox_id, on_engine=True)
        _running(sandbox)
        path = _path(request)
        length = request.META.get("CONTENT_LENGTH") or ""
        if length.isdigit() and int(length) > UPLOAD_MAX_BYTES:
            return _too_large("the upload", UPLOAD_MAX_BYTES)
        stream = request._request  # Django's request: a file-like body, never read whole
        try:
            _backend().put_files(
                _handle(sandbox),
                path=path,
                chunks=taskfiles.read_limited(stream, limit=UPLOAD_MAX_BYTES),
            )
        except SandboxError as exc:
            raise Invalid(str(exc), field="body") from None
        return HttpResponse(status=204)

    @extend_schema(
        operation_id="task_sandboxes_download",
        summary="Download a file or directory of a task sandbox as a tar stream.",
        parameters=[OpenApiParameter("path", str, required=True, description="Absolute path.")],
        responses={
            (200, "application/x-tar"): OpenApiResponse(OpenApiTypes.BINARY),
            **errors(400, 401, 403, 404, 409, 413),
        },
    )
    def get(self, request, sandbox_id: str):
        sandbox = _sandbox_of(request, sandbox_id, on_engine=True)
        _running(sandbox)
        path = _path(request)
        backend = _backend()
        try:  # the size, then the tar, in one round trip to the sandbox
            size, chunks = backend.open_files(
                _handle(sandbox), path=path, max_bytes=DOWNLOAD_MAX_BYTES
            )
        except SandboxError as exc:
            raise Invalid(str(exc), field="path") from None
        if size is None:
            raise NotFound(f"{path} does not exist in the task sandbox.")
        if size > DOWNLOAD_MAX_BYTES:
            return _too_large(path, DOWNLOAD_MAX_BYTES)
        return ThreadedStreamingResponse(chunks, content_type="application/x-tar")


def _too_large(what: str, limit: int) -> HttpResponse:
    body = {"detail": f"{what} is over {limit // 2**20} MB.", "code": "too_large"}
    return HttpResponse(json.dumps(body), status=413, content_type="application/json")


class RunTaskSandboxesView(ListAPIView):
    """A run's task sandboxes: for its own key, a project key or a member of its project."""

    authentication_classes = [RunKeyAuthentication, SessionAuthentication]

    @extend_schema(
        operation_id="runs_task_sandboxes",
        summary="List a run's task sandboxes (managed Harbor), newest first.",
        responses={200: TaskSandboxSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request, run_id: str):
        run = own_run(request, run_id=run_id) or access_for_request(request).get(Run, pk=run_id)
        return get_paginated_response(
            view=self,
            queryset=TaskSandbox.objects.filter(run=run),
            serializer_class=TaskSandboxSerializer,
        )
