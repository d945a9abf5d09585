from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.run_launch, name="new"),
    path("model/<str:model_id>/new/", views.model_run_launch, name="model-launch"),
    path("<str:run_id>/", views.run_detail, name="detail"),
    path("<str:run_id>/log.txt", views.run_log_download, name="log-download"),
    path("<str:run_id>/cancel/", views.run_cancel, name="cancel"),
    path("<str:run_id>/again/", views.run_again, name="again"),
    path("launch/<str:harness_id>/", views.run_launch, name="launch"),
]
