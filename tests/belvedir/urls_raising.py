"""The site's URLs plus two views that fail unexpectedly (a DRF view and a plain one)."""

from django.urls import path
from rest_framework.views import APIView

from belvedir.urls import urlpatterns as site_urlpatterns


class Boom(APIView):
    def get(self, request):
        raise RuntimeError("an unexpected bug")


def plain_boom(request):
    raise RuntimeError("an unexpected bug")


urlpatterns = [
    path("api/v1/boom", Boom.as_view()),
    path("api/v1/plain-boom", plain_boom),
    path("plain-boom/", plain_boom),
    *site_urlpatterns,
]
handler500 = "belvedir.views.server_error"
