from django.urls import path

from harnesses import environment_views as views

app_name = "environments"
urlpatterns = [
    path("", views.environment_list, name="list"),
    path("new/", views.environment_new, name="new"),
    path("generate/", views.environment_generate, name="generate"),
    path("generations/<str:generation_id>/", views.generation_detail, name="generation"),
    path("<str:environment_id>/", views.environment_detail, name="detail"),
    path("<str:environment_id>/edit/", views.environment_edit, name="edit"),
    path("<str:environment_id>/delete/", views.environment_delete, name="delete"),
    path("<str:environment_id>/harness/", views.environment_harness, name="harness"),
    path("<str:environment_id>/export/", views.environment_export, name="export"),
]
