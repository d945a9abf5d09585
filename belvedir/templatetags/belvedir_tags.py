"""Small display filters and tags, builtins in every template (settings.TEMPLATES)."""

import json
from datetime import timedelta

from django import template
from django.utils.safestring import mark_safe

from belvedir import text

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def score(value) -> str:
    """A score as every page shows it: "0.850", "1.000"; "—" when there is none."""
    return text.score_text(value)


@register.filter
def score_error(run) -> str:
    """A run's score with its standard error when it has one (its `score_stderr`, issue 27):
    "0.620 ± 0.069"; else as `score` shows it."""
    return text.score_with_error(getattr(run, "score", None), getattr(run, "score_stderr", None))


@register.filter
def usd(value) -> str:
    """Integer micro-dollars as every page, message and the CLI show money (`text.usd`):
    2000000 → "$2.00", 12300 → "$0.0123"."""
    try:
        micros = int(value or 0)
    except (TypeError, ValueError):
        return ""
    return text.usd(micros)


@register.filter
def counted(value, noun: str) -> str:
    """A count with its noun: `3|counted:"task"` → "3 tasks", "1 task";
    an irregular plural after a comma: `n|counted:"entry,entries"`."""
    try:
        number = int(value or 0)
    except (TypeError, ValueError):
        return ""
    return text.counted(number, noun)


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


@register.simple_tag(takes_context=True)
def aria_current(context, *paths: str) -> str:
    """` aria-current="page"` on the link to where the user is: a path prefix ("/runs/"),
    or "=/traces/" for that exact path."""
    request = context.get("request")
    if request is None:
        return ""
    here = request.path
    for path in paths:
        exact = path.startswith("=")
        if (here == path[1:]) if exact else here.startswith(path):
            return mark_safe(' aria-current="page"')
    return ""
