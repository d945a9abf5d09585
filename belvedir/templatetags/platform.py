"""`{% platform_url %}`: the platform's public URL (BELVEDIR_BASE_URL), for snippets users copy."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def platform_url() -> str:
    return settings.BELVEDIR_BASE_URL.rstrip("/")


@register.simple_tag
def gpu_workers() -> bool:
    """Whether GPU workers are configured (BELVEDIR_GPU_TYPES names a GPU type)."""
    return bool(settings.BELVEDIR_GPU_TYPES)
