"""Trace ingest and the trace API, mounted under /api/v1/ by belvedir/urls.py."""

from django.urls import path

from traces import api, ingest_views

urlpatterns = [
    path("traces", ingest_views.traces, name="api-traces"),
    path("outcomes", ingest_views.outcomes, name="api-outcomes"),
    path("sessions", api.SessionListView.as_view(), name="api-sessions"),
    path("sessions/<str:session_id>", api.SessionDetailView.as_view(), name="api-session"),
    path("task-groups", api.TaskGroupListView.as_view(), name="api-task-groups"),
    path("task-groups/<str:group_id>", api.TaskGroupDetailView.as_view(), name="api-task-group"),
]
