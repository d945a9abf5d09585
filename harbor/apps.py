from django.apps import AppConfig


class HarborConfig(AppConfig):
    name = "harbor"
    verbose_name = "Managed Harbor workspace"

    def ready(self) -> None:
        from harbor import hooks

        hooks.register()  # what harbor adds to a run's life (runs/hooks.py)
