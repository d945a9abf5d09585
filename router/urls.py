from django.urls import path

from router import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="router-chat-completions"),
]
