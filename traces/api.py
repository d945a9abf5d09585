"""REST API for sessions, their spans, LLM calls and tasks, and task groups."""

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin, Pagination
from traces import selectors
from traces.models import Session, Span, Task, TaskGroup


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


class SessionListView(AccessMixin, APIView):
    def get(self, request):
        q = request.query_params
        sessions = selectors.sessions_for(
            access=self.access,
            run=q.get("run"),
            outcome=q.get("outcome"),
            model=q.get("model"),
            since=q.get("since"),
            until=q.get("until"),
        )
        page = Pagination()
        rows = page.paginate_queryset(sessions, request, view=self)
        return page.get_paginated_response(SessionSerializer(rows, many=True).data)


class SessionDetailView(AccessMixin, APIView):
    def get(self, request, session_id: str):
        session = self.access.get(Session, pk=session_id)
        spans = list(Span.objects.filter(session=session).order_by("start_time"))
        return Response(
            SessionSerializer(session).data
            | {
                "spans": SpanSerializer(spans, many=True).data,
                "llm_calls": LlmCallSerializer([s for s in spans if s.is_llm], many=True).data,
                "tasks": TaskSerializer(session.tasks.all(), many=True).data,
            }
        )


class TaskGroupListView(AccessMixin, APIView):
    def get(self, request):
        page = Pagination()
        rows = page.paginate_queryset(
            selectors.task_groups_for(access=self.access), request, view=self
        )
        return page.get_paginated_response(TaskGroupSerializer(rows, many=True).data)


class TaskGroupDetailView(AccessMixin, APIView):
    def get(self, request, group_id: str):
        group = self.access.get(TaskGroup, pk=group_id)
        tasks = selectors.tasks_for(access=self.access, group=group.pk)[:200]
        return Response(
            TaskGroupSerializer(group).data | {"tasks": TaskSerializer(tasks, many=True).data}
        )
