from django.apps import AppConfig


class RouterConfig(AppConfig):
    name = "router"
    verbose_name = "Model router"

    def ready(self):
        from belvedir import lifespan
        from router import settlement

        lifespan.on_shutdown(settlement.drain)  # calls answered but not yet settled
