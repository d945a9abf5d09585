"""GET /api/v1/runs/compare?runs=A,B: two runs compared task by task (scores.selectors.
paired_comparison, the statistics in scores/stats.py)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.access import Access
from belvedir.api import AccessMixin
from belvedir.errors import Invalid, NotFound
from belvedir.schema import errors
from runs.models import Run
from scores import selectors


class ComparedRunSerializer(serializers.Serializer):
    id = serializers.CharField()
    harness_name = serializers.CharField()
    model = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    grading = serializers.CharField()
    attempts = serializers.IntegerField()
    tasks_only_here = serializers.ListField(
        child=serializers.CharField(),
        help_text="Tasks this run scored and the other did not: listed, never compared.",
    )


class RunCompareSerializer(serializers.Serializer):
    a = ComparedRunSerializer()
    b = ComparedRunSerializer()
    shared_tasks = serializers.IntegerField(help_text="Tasks both runs scored.")
    difference = serializers.FloatField(
        allow_null=True, help_text="The mean paired difference B - A over the shared tasks."
    )
    stderr = serializers.FloatField(allow_null=True, help_text="sd of the differences / sqrt n.")
    ci_low = serializers.FloatField(
        allow_null=True, help_text="The 95% interval's low end (normal: difference - 1.96 SE)."
    )
    ci_high = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(
        allow_null=True, help_text="Two-sided, normal approximation: 2 (1 - Phi(|d| / SE))."
    )
    b_won = serializers.IntegerField(allow_null=True)
    tied = serializers.IntegerField(allow_null=True)
    a_won = serializers.IntegerField(allow_null=True)
    distinguishable = serializers.BooleanField(help_text="The 95% interval leaves out 0.")
    tasks_needed = serializers.IntegerField(
        allow_null=True,
        help_text="About how many shared tasks would tell a difference of this size at 80% "
        "power: ((1.96 + 0.84) sd / |difference|)^2.",
    )
    summary = serializers.CharField(help_text="The comparison in a sentence.")
    why_none = serializers.CharField(help_text="Why there is no paired comparison; blank.")
    notes = serializers.ListField(child=serializers.CharField())
    tasks = serializers.ListField(
        child=serializers.DictField(), help_text="Each shared task: task, a, b, difference."
    )


def _compared(run: Run, only_here: list[str]) -> dict:
    return {
        "id": run.pk,
        "harness_name": run.harness_name,
        "model": run.model,
        "score": run.score,
        "grading": run.grading,
        "attempts": run.attempts,
        "tasks_only_here": only_here,
    }


def compare_data(comparison: selectors.Comparison) -> dict:
    paired = comparison.paired
    numbers = ("mean", "stderr", "ci_low", "ci_high", "p_value", "b_won", "tied", "a_won")
    values = {name: getattr(paired, name) if paired else None for name in numbers}
    return {
        "a": _compared(comparison.a, comparison.only_a),
        "b": _compared(comparison.b, comparison.only_b),
        "shared_tasks": len(comparison.rows),
        "difference": values.pop("mean"),
        **values,
        "distinguishable": bool(paired and paired.distinguishable),
        "tasks_needed": paired.tasks_needed if paired else None,
        "summary": comparison.sentence,
        "why_none": comparison.why_none,
        "notes": comparison.notes,
        "tasks": [
            {"task": name, "a": a, "b": b, "difference": b - a} for name, a, b in comparison.rows
        ],
    }


def compared_runs(access: Access, ids: list[str], *, field: str) -> tuple[Run, Run]:
    """The two runs to compare, each one the caller may open (else 404), in the order given."""
    ids = [run_id.strip() for run_id in ids if run_id.strip()]
    if len(ids) != 2 or ids[0] == ids[1]:
        raise Invalid("Give two different run ids to compare: runs=A,B.", field=field)
    found = access.scope(Run).in_bulk(ids)
    if len(found) != 2:
        raise NotFound("Not found.")
    return found[ids[0]], found[ids[1]]


class RunCompareView(AccessMixin, APIView):
    @extend_schema(
        operation_id="runs_compare",
        summary="Two runs compared task by task: B - A over their shared tasks.",
        description="The mean paired difference with its standard error, 95% interval and "
        "two-sided p-value (normal approximation, z = 1.96), the tasks each won, tied and "
        "lost, and the tasks only one run scored (listed, never compared).",
        parameters=[OpenApiParameter("runs", str, required=True, description="Two run ids: A,B.")],
        responses={200: RunCompareSerializer, **errors(400, 401, 404)},
    )
    def get(self, request):
        a, b = compared_runs(
            self.access, request.query_params.get("runs", "").split(","), field="runs"
        )
        return Response(compare_data(selectors.paired_comparison(a, b)))
