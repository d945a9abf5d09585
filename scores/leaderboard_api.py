"""GET /api/v1/harnesses/{id}/leaderboard and /api/v1/environments/{id}/leaderboard: the
boards of scores/leaderboard.py (its docstring gives the groups and the rank rule)."""

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from belvedir.api import AccessMixin
from belvedir.schema import errors
from harnesses.models import Environment, Harness
from scores import leaderboard


class GroupSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="Pass as ?group= for this group's board.")
    label = serializers.CharField()
    environment_version = serializers.IntegerField(
        allow_null=True, help_text="The environment version the runs' harness took; null: none."
    )
    grading = serializers.CharField()
    attempts = serializers.IntegerField()
    tasks_md5 = serializers.CharField(help_text="MD5 of the Tasks field the runs launched with.")
    runs = serializers.IntegerField()
    models = serializers.IntegerField()


class RowSerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1 + the rows whose interval lies wholly above.")
    tied = serializers.BooleanField(help_text="Another row has the same rank.")
    model = serializers.CharField()
    harness_id = serializers.CharField(allow_null=True)
    harness_name = serializers.CharField()
    run = serializers.CharField(help_text="The run whose score the row shows.")
    score = serializers.FloatField()
    score_stderr = serializers.FloatField(allow_null=True)
    score_ci_low = serializers.FloatField(allow_null=True)
    score_ci_high = serializers.FloatField(allow_null=True)
    n_tasks = serializers.IntegerField(allow_null=True)
    score_interval_note = serializers.CharField(help_text="Why there is no interval; blank.")
    finished_at = serializers.DateTimeField()
    runs = serializers.IntegerField(help_text="The row's runs in this group.")
    compare = serializers.CharField(
        allow_null=True, help_text="Its paired comparison with the leader (null: the leader)."
    )


class LeaderboardSerializer(serializers.Serializer):
    pick = serializers.ChoiceField(choices=leaderboard.PICKS)
    group = GroupSerializer(allow_null=True, help_text="The group ranked; null: no scored run.")
    groups = GroupSerializer(many=True, help_text="Every group present, newest run first.")
    rank_rule = serializers.CharField()
    rows = RowSerializer(many=True)


def _group(group: leaderboard.Group) -> dict:
    fields = ("key", "label", "environment_version", "grading", "attempts", "tasks_md5", "runs")
    return {**{name: getattr(group, name) for name in fields}, "models": group.models}


def board_data(board: leaderboard.Board) -> dict:
    compare = reverse("api-runs-compare")
    return {
        "pick": board.pick,
        "group": _group(board.group) if board.group else None,
        "groups": [_group(g) for g in board.groups],
        "rank_rule": leaderboard.TIE_RULE,
        "rows": [
            {
                "rank": row.rank,
                "tied": row.tied,
                **{name: getattr(row.run, name) for name in leaderboard.ROW_FIELDS[1:]},
                "run": row.run.pk,
                "runs": row.runs,
                "compare": f"{compare}?runs={row.leader.pk},{row.run.pk}" if row.leader else None,
            }
            for row in board.rows
        ],
    }


PARAMETERS = [
    OpenApiParameter("pick", str, enum=list(leaderboard.PICKS), description="latest (default)"),
    OpenApiParameter("group", str, description="A group's key (default: the newest run's)."),
]
DESCRIPTION = (
    "One row per model, ranked by its latest or best score with the 95% interval. Runs are "
    "ranked together only with the same environment version, Tasks field, grading and "
    "attempts (a group). Rank: 1 + the rows whose interval lies wholly above; equal ranks "
    "are tied."
)


class _LeaderboardView(AccessMixin, APIView):
    model: type
    board_of = None

    def get(self, request, **ids):
        (subject_id,) = ids.values()
        subject = self.access.get(self.model, pk=subject_id)
        query = request.query_params
        board = type(self).board_of(
            subject, pick=query.get("pick") or "latest", group=query.get("group", "")
        )
        return Response(board_data(board))


def _schema(operation_id: str, summary: str):
    return extend_schema_view(
        get=extend_schema(
            operation_id=operation_id,
            summary=summary,
            description=DESCRIPTION,
            parameters=PARAMETERS,
            responses={200: LeaderboardSerializer, **errors(400, 401, 404)},
        )
    )


@_schema("harnesses_leaderboard", "The harness's leaderboard: the models that ran it, ranked.")
class HarnessLeaderboardView(_LeaderboardView):
    model = Harness
    board_of = leaderboard.harness_board


@_schema(
    "environments_leaderboard",
    "The environment's leaderboard: a row per harness made from it and model, ranked.",
)
class EnvironmentLeaderboardView(_LeaderboardView):
    model = Environment
    board_of = leaderboard.environment_board
