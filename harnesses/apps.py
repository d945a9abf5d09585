from django.apps import AppConfig


class HarnessesConfig(AppConfig):
    name = "harnesses"
    verbose_name = "Harnesses and environments"

    def ready(self) -> None:
        from harnesses import checks  # noqa: F401  (registers the GPU checks)
