"""The harness and environment API, mounted under /api/v1/ by belvedir/urls.py."""

from django.urls import path

from harnesses import api, environment_api

urlpatterns = [
    path("harnesses", api.HarnessListView.as_view(), name="api-harnesses"),
    path("harnesses/<str:harness_id>", api.HarnessDetailView.as_view(), name="api-harness"),
    path("catalog", api.CatalogView.as_view(), name="api-catalog"),
    path("environments", environment_api.EnvironmentListView.as_view(), name="api-environments"),
    path(
        "environments/generate",
        environment_api.EnvironmentGenerateView.as_view(),
        name="api-environments-generate",
    ),
    path(
        "environments/generations/<str:generation_id>",
        environment_api.GenerationDetailView.as_view(),
        name="api-environment-generation",
    ),
    path(
        "environments/generations/<str:generation_id>/save",
        environment_api.GenerationSaveView.as_view(),
        name="api-environment-generation-save",
    ),
    path(
        "environments/<str:environment_id>",
        environment_api.EnvironmentDetailView.as_view(),
        name="api-environment",
    ),
    path(
        "environments/<str:environment_id>/versions",
        environment_api.EnvironmentVersionListView.as_view(),
        name="api-environment-versions",
    ),
    path(
        "environments/<str:environment_id>/harness",
        environment_api.EnvironmentHarnessView.as_view(),
        name="api-environment-harness",
    ),
]
