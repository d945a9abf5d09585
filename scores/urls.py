"""Score pages, included at the site's root by belvedir/urls.py before runs' (the compare page
keeps its address under /runs/; the leaderboards are under /scores/)."""

from django.urls import path

from scores import views

app_name = "scores"
urlpatterns = [
    path("runs/compare/", views.run_compare, name="compare"),
    path(
        "scores/harnesses/<str:harness_id>/leaderboard/",
        views.harness_leaderboard,
        name="harness-leaderboard",
    ),
    path(
        "scores/environments/<str:environment_id>/leaderboard/",
        views.environment_leaderboard,
        name="environment-leaderboard",
    ),
]
