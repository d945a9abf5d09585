"""Dollars as integer micro-dollars and back: money is never a float in the ledger."""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from belvedir.errors import Invalid
from belvedir.text import usd
from billing.models import MICROS_PER_USD


def usd_to_micros(value, *, field: str = "amount") -> int:
    """`12.5`, `"12.50"` or `Decimal("12.5")` as micro-dollars; Invalid naming `field` if not a number."""
    try:
        amount = Decimal(str(value).strip().lstrip("$"))
    except (InvalidOperation, ValueError):
        raise Invalid(
            f"{field} must be an amount in US dollars, like 12.50.", field=field
        ) from None
    if not amount.is_finite():
        raise Invalid(f"{field} must be an amount in US dollars, like 12.50.", field=field)
    return int((amount * MICROS_PER_USD).to_integral_value(rounding=ROUND_HALF_UP))


__all__ = ["usd", "usd_to_micros"]
