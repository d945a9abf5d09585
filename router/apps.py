from django.apps import AppConfig


class RouterConfig(AppConfig):
    name = "router"
    verbose_name = "Model router"
