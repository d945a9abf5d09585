from django.apps import AppConfig


class BelvedirConfig(AppConfig):
    name = "belvedir"
    verbose_name = "Tenancy and keys"
