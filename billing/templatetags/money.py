from django import template

from billing.money import usd as usd_text

register = template.Library()


@register.filter
def usd(micros) -> str:
    """Micro-dollars as `$12.50`."""
    return usd_text(int(micros or 0))
