"""The scores API, mounted under /api/v1/ by belvedir/urls.py (before runs': runs/compare is
not a run id)."""

from django.urls import path

from scores import compare_api, leaderboard_api

urlpatterns = [
    path("runs/compare", compare_api.RunCompareView.as_view(), name="api-runs-compare"),
    path(
        "harnesses/<str:harness_id>/leaderboard",
        leaderboard_api.HarnessLeaderboardView.as_view(),
        name="api-harness-leaderboard",
    ),
    path(
        "environments/<str:environment_id>/leaderboard",
        leaderboard_api.EnvironmentLeaderboardView.as_view(),
        name="api-environment-leaderboard",
    ),
]
