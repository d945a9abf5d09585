from django.urls import path

from harnesses import views

app_name = "harnesses"
urlpatterns = [
    path("", views.harness_list, name="list"),
    path("new/", views.harness_new, name="new"),
    path("<str:harness_id>/", views.harness_detail, name="detail"),
    path("<str:harness_id>/delete/", views.harness_delete, name="delete"),
    path("<str:harness_id>/install-cache/clear/", views.install_cache_clear, name="cache-clear"),
]
