"""The task-sandbox API a managed Harbor run drives, and a run's task sandboxes, mounted under
/api/v1/ by belvedir/urls.py."""

from django.urls import path

from harbor import api

urlpatterns = [
    path(
        "runs/<str:run_id>/task-sandboxes",
        api.RunTaskSandboxesView.as_view(),
        name="api-run-task-sandboxes",
    ),
    path(
        "task-sandboxes",
        api.TaskSandboxCreateView.as_view(),
        name="api-task-sandboxes",
    ),
    path(
        "task-sandboxes/<str:sandbox_id>",
        api.TaskSandboxDetailView.as_view(),
        name="api-task-sandbox",
    ),
    path(
        "task-sandboxes/<str:sandbox_id>/exec",
        api.TaskSandboxExecView.as_view(),
        name="api-task-sandbox-exec",
    ),
    path(
        "task-sandboxes/<str:sandbox_id>/files",
        api.TaskSandboxFilesView.as_view(),
        name="api-task-sandbox-files",
    ),
]
