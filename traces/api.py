"""REST API for sessions, their spans, LLM calls and tasks, and task groups."""

from django.db.models import BooleanField, DateTimeField, ExpressionWrapper, Q
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, ListAPIView, get_paginated_response
from belvedir.errors import Invalid
from belvedir.schema import errors
from traces import selectors
from traces.models import Outcome, Session, Span, Task, TaskGroup


class SessionSerializer(serializers.ModelSerializer):
    session_id = serializers.CharField(source="external_id")
    total_tokens = serializers.IntegerField(read_only=True)

    class Meta:
        model = Session
        fields = [
            "id",
            "session_id",
            "run",
            "outcome",
            "model",
            "span_count",
            "llm_call_count",
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "started_at",
            "ended_at",
            "last_received_at",
        ]


class SpanSerializer(serializers.ModelSerializer):
    duplicate = serializers.BooleanField(
        read_only=True,
        help_text="A client's record of a call the router recorded too: kept, never counted "
        "(the router's span, from_router, counts).",
    )

    class Meta:
        model = Span
        fields = [
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "kind",
            "span_kind",
            "entity_name",
            "start_time",
            "end_time",
            "duration_ms",
            "status_code",
            "status_message",
            "attributes",
            "events",
            "is_llm",
            "from_router",
            "duplicate",
        ]


class LlmCallSerializer(serializers.ModelSerializer):
    class Meta:
        model = Span
        fields = [
            "span_id",
            "trace_id",
            "name",
            "model",
            "input_messages",
            "output_messages",
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "duration_ms",
            "start_time",
            "status_code",
        ]


class TaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = [
            "id",
            "name",
            "normalized_name",
            "kind",
            "group",
            "session",
            "started_at",
            "ended_at",
            "llm_call_count",
            "total_tokens",
            "status",
        ]


class TaskGroupSerializer(serializers.ModelSerializer):
    class Meta:
        model = TaskGroup
        fields = [
            "id",
            "name",
            "normalized_name",
            "task_count",
            "success_count",
            "fail_count",
            "last_seen_at",
        ]


class SessionDetailSerializer(SessionSerializer):
    spans_total = serializers.IntegerField(help_text="All spans of the session.")
    span_offset = serializers.IntegerField(help_text="The first span's index in this answer.")
    spans = SpanSerializer(many=True)
    llm_calls = LlmCallSerializer(
        many=True, help_text="The LLM calls among `spans`, each once (no `duplicate`)."
    )
    tasks = TaskSerializer(many=True)

    class Meta(SessionSerializer.Meta):
        fields = [
            *SessionSerializer.Meta.fields,
            "spans_total",
            "span_offset",
            "spans",
            "llm_calls",
            "tasks",
        ]


class TaskGroupDetailSerializer(TaskGroupSerializer):
    tasks = TaskSerializer(many=True, help_text="The group's latest 200 tasks.")

    class Meta(TaskGroupSerializer.Meta):
        fields = [*TaskGroupSerializer.Meta.fields, "tasks"]


class SessionListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="sessions_list",
        summary="List the project's trace sessions, most recently active first.",
        parameters=[
            OpenApiParameter("run", str, description="Only sessions of this run id."),
            OpenApiParameter(
                "outcome",
                str,
                enum=[*Outcome.values, "none"],
                description="Only this reported outcome (`none`: not reported).",
            ),
            OpenApiParameter("model", str, description="Only sessions that called this model."),
            OpenApiParameter("since", str, description="Active at or after this time (ISO 8601)."),
            OpenApiParameter(
                "until", str, description="Started at or before this time (ISO 8601)."
            ),
        ],
        responses={200: SessionSerializer(many=True), **errors(400, 401, 404)},
    )
    def get(self, request):
        q = request.query_params
        sessions = selectors.sessions_for(
            project=self.access.project,
            run=q.get("run"),
            outcome=q.get("outcome"),
            model=q.get("model"),
            since=q.get("since"),
            until=q.get("until"),
        )
        return get_paginated_response(
            view=self, queryset=sessions, serializer_class=SessionSerializer
        )


class SessionDetailView(AccessMixin, APIView):
    """A session with its spans (`span_limit`/`span_offset`, 500 by default), LLM calls and tasks."""

    @extend_schema(
        operation_id="sessions_read",
        summary="Read a session with a page of its spans, its LLM calls and its tasks.",
        parameters=[
            OpenApiParameter(
                "span_limit", int, description="Spans to include (500; at most 2000)."
            ),
            OpenApiParameter("span_offset", int, description="Spans to skip, in start order."),
        ],
        responses={200: SessionDetailSerializer, **errors(400, 401, 404)},
    )
    def get(self, request, session_id: str):
        session = self.access.get(Session, pk=session_id)
        limit = _bounded_int(request, "span_limit", default=500, maximum=2000)
        offset = _bounded_int(request, "span_offset", default=0, maximum=10**9)
        spans = _spans_as_serialized(
            Span.objects.filter(session=session)
            .order_by("start_time", "id")
            .values(*_SPAN_COLUMNS, duplicate=_DUPLICATE)[offset : offset + limit]
        )
        return Response(
            SessionSerializer(session).data
            | {
                "spans_total": session.span_count,
                "span_offset": offset,
                "spans": [{f: span[f] for f in SpanSerializer.Meta.fields} for span in spans],
                "llm_calls": [
                    {f: span[f] for f in LlmCallSerializer.Meta.fields}
                    for span in spans
                    if span["is_llm"] and not span["duplicate"]  # each call once
                ],
                "tasks": TaskSerializer(session.tasks.all(), many=True).data,
            }
        )


# The span page's columns: what SpanSerializer and LlmCallSerializer give, nothing else.
_SPAN_COLUMNS = [
    c
    for c in dict.fromkeys([*SpanSerializer.Meta.fields, *LlmCallSerializer.Meta.fields])
    if c != "duplicate"
]
_DUPLICATE = ExpressionWrapper(Q(duplicate_of__isnull=False), output_field=BooleanField())
_SPAN_DATES = [c for c in _SPAN_COLUMNS if isinstance(Span._meta.get_field(c), DateTimeField)]


def _spans_as_serialized(rows) -> list[dict]:
    """The rows (`values()` of _SPAN_COLUMNS) as SpanSerializer/LlmCallSerializer give their
    fields, without a model instance and a DRF field call per value: at 500 spans a page
    those were most of the answer's time. Only dates need converting, as DRF's
    DateTimeField does (ISO 8601 in the current time zone, UTC as "Z"); the other columns
    come from the database as the serializers give them (tests/traces/test_trace_pages.py
    compares the two)."""
    tz = timezone.get_current_timezone()
    out = []
    for row in rows:
        for column in _SPAN_DATES:
            value = row[column]
            if value is not None:
                text = value.astimezone(tz).isoformat()
                row[column] = text[:-6] + "Z" if text.endswith("+00:00") else text
        out.append(row)
    return out


def _bounded_int(request, name: str, *, default: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 <= int(raw) <= maximum:
        raise Invalid(f"{name} must be a whole number from 0 to {maximum}.", field=name)
    return int(raw)


class TaskGroupListView(AccessMixin, ListAPIView):
    @extend_schema(
        operation_id="task_groups_list",
        summary="List task groups: tasks of the same name across sessions, with pass counts.",
        responses={200: TaskGroupSerializer(many=True), **errors(401, 404)},
    )
    def get(self, request):
        return get_paginated_response(
            view=self,
            queryset=selectors.task_groups_for(project=self.access.project),
            serializer_class=TaskGroupSerializer,
        )


class TaskGroupDetailView(AccessMixin, APIView):
    @extend_schema(
        operation_id="task_groups_read",
        summary="Read a task group with its latest tasks.",
        responses={200: TaskGroupDetailSerializer, **errors(401, 404)},
    )
    def get(self, request, group_id: str):
        group = self.access.get(TaskGroup, pk=group_id)
        tasks = selectors.tasks_for(project=group.project, group=group.pk)[:200]
        return Response(
            TaskGroupSerializer(group).data | {"tasks": TaskSerializer(tasks, many=True).data}
        )
