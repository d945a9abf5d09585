"""The ASGI entry point: serve with `uvicorn belvedir.asgi:application` (see the README).

The model router's async views hold no worker thread while a model call streams."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "belvedir.settings")
application = get_asgi_application()
