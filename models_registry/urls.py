from django.urls import path

from models_registry import views

app_name = "models"
urlpatterns = [
    path("", views.model_list, name="list"),
    path("upload/", views.model_upload, name="upload"),
    path("hugging-face-token/", views.hf_token_settings, name="hf-token"),
    path("<str:model_id>/", views.model_detail, name="detail"),
    path("<str:model_id>/delete/", views.model_delete, name="delete"),
]
