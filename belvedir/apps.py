from django.apps import AppConfig


class BelvedirConfig(AppConfig):
    name = "belvedir"
    verbose_name = "Tenancy and keys"

    def ready(self) -> None:
        from belvedir import logfilters
        from belvedir.audit import connect_signals

        connect_signals()
        logfilters.install()
