"""Small display filters."""

import json
from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def seconds(value) -> str:
    """A duration as "3.6 s", "2 min 5 s" or "1 h 2 min"."""
    if not isinstance(value, timedelta):
        return ""
    total = value.total_seconds()
    if total < 60:
        return f"{total:.1f} s"
    minutes, secs = divmod(int(total), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
