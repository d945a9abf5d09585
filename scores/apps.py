from django.apps import AppConfig


class ScoresConfig(AppConfig):
    name = "scores"
    verbose_name = "Scores"

    def ready(self) -> None:
        from scores import hooks

        hooks.register()  # a run's end stores its score's interval (runs/hooks.py)
