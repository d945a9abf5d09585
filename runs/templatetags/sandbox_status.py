"""The admin's sandbox isolation banner, with this host's GPU sandboxes' problems and warnings."""

from django import template

from belvedir.gpu_host import gpu_host_check
from belvedir.isolation import isolation_status

register = template.Library()


@register.inclusion_tag("runs/isolation_banner.html")
def sandbox_isolation_banner() -> dict:
    status, gpus = isolation_status(), gpu_host_check()
    return {"problems": status.problems, "warnings": status.warnings + gpus.warnings} | {
        "gpu_problems": gpus.problems
    }
