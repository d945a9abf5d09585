"""The runs API, mounted under /api/v1/ by belvedir/urls.py."""

from django.urls import path

from runs import adapters, api

urlpatterns = [
    path(
        "environments/<str:environment_id>/export",
        api.RunEnvironmentExportView.as_view(),  # the run keys' limits live with runs
        name="api-environment-export",
    ),
    path("runs", api.RunListView.as_view(), name="api-runs"),
    path("runs/<str:run_id>", api.RunDetailView.as_view(), name="api-run"),
    path("runs/<str:run_id>/cancel", api.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/log", api.RunLogView.as_view(), name="api-run-log"),
    path("runs/<str:run_id>/tasks", api.RunTasksView.as_view(), name="api-run-tasks"),
    path(
        "runs/<str:run_id>/tasks/export",
        api.RunTasksExportView.as_view(),
        name="api-run-tasks-export",
    ),
    path(
        "adapters/<str:run_id>/<str:token>",
        adapters.AdapterDownloadView.as_view(),
        name="api-adapter-download",
    ),
    path("models/<str:model_id>/runs", api.ModelRunLaunchView.as_view(), name="api-model-runs"),
    path(
        "models/<str:model_id>/benchmarks",
        api.ModelBenchmarksView.as_view(),
        name="api-model-benchmarks",
    ),
]
