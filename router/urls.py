from django.urls import path

from router import views

urlpatterns = [
    *(
        path(endpoint, view, name=f"router-{endpoint.replace('/', '-')}")
        for endpoint, view in views.served.items()
    ),
    path("<path:rest>", views.unknown, name="router-unknown"),
]
