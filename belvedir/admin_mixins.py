"""What the apps' admins share: read-only pages for rows only services write, and money columns."""

from collections.abc import Callable

from django.contrib import admin

from belvedir.text import usd


class ReadOnlyAdminMixin:
    """Rows written by the services only (ledger, audit, sums): listed and shown, never added,
    changed or deleted here."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


def usd_column(field: str, description: str) -> Callable:
    """A list/detail column showing the micro-dollars in `field` exactly (`usd`: "$0.015"),
    sorted by that field: `shown_amount = usd_column("amount_micros", "amount")`."""

    @admin.display(description=description, ordering=field)
    def column(self, obj) -> str:
        return usd(getattr(obj, field))

    return column
