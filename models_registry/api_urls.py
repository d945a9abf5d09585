"""The fine-tuned models API, mounted under /api/v1/ by belvedir/urls.py."""

from django.urls import path

from models_registry import api

urlpatterns = [
    path("models/fine-tuned", api.FineTunedModelListView.as_view(), name="api-models-list"),
    path("models/<str:model_id>", api.FineTunedModelDetailView.as_view(), name="api-model"),
]
