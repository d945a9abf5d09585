"""Score pages, included at the site's root by belvedir/urls.py before runs' (the compare page
keeps its address under /runs/)."""

from django.urls import path

from scores import views

app_name = "scores"
urlpatterns = [
    path("runs/compare/", views.run_compare, name="compare"),
]
