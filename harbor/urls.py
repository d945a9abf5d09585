"""Harbor's pages, mounted under /harbor/ by belvedir/urls.py."""

from django.urls import path

from harbor import views

app_name = "harbor"
urlpatterns = [
    path(
        "runs/<str:run_id>/task-sandboxes/",
        views.run_task_sandboxes,
        name="run-task-sandboxes",
    ),
]
