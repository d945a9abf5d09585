"""The drivers shipped with the platform, as read-only git repositories (dumb HTTP), mounted
under /git/ by belvedir/urls.py."""

from django.urls import path

from harnesses import git_views

urlpatterns = [
    path("<str:name>.git/<path:path>", git_views.git_file, name="driver-git"),
]
