"""The admin's sandbox isolation banner."""

from django import template

from belvedir.isolation import isolation_status

register = template.Library()


@register.inclusion_tag("runs/isolation_banner.html")
def sandbox_isolation_banner() -> dict:
    status = isolation_status()
    return {"problems": status.problems, "warnings": status.warnings}
