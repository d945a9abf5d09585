from django.urls import path

from traces import views

app_name = "traces"
urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("sessions/<str:session_id>/", views.session_detail, name="session"),
    path("sessions/<str:session_id>/spans/<int:span_pk>/", views.span_detail, name="span"),
    path("tasks/", views.task_list, name="tasks"),
    path("task-groups/", views.task_group_list, name="task-groups"),
    path("task-groups/<str:group_id>/", views.task_group_detail, name="task-group"),
]
