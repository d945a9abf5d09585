"""Read settings from environment variables, failing loudly on bad values."""

import os
import re

from django.core.exceptions import ImproperlyConfigured

from sandboxes.gpu import EXAMPLE, ShapeError, parse_shapes

_TRUE = {"1", "true", "on"}
_FALSE = {"0", "false", "off", ""}


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0/true/false/on/off, not {raw!r}")


def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def envfloat(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


_DOLLARS = re.compile(r"^\s*\$?(\d+)(?:\.(\d{1,6}))?\s*$")


def envmicros(name: str, default: str) -> int:
    """An amount of US dollars (2.00, 0.5) as integer micro-dollars (2000000)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        raw = default
    match = _DOLLARS.match(raw)
    if not match:
        raise ImproperlyConfigured(f"{name} must be an amount of dollars like 2.00, not {raw!r}")
    return int(match.group(1)) * 1_000_000 + int((match.group(2) or "").ljust(6, "0"))


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def envsize(name: str, default: int, *, minimum: int = 0) -> int:
    """A size in bytes: a whole number, optionally with K, M, G or T (powers of 1024)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    match = _SIZE.match(raw)
    if not match:
        raise ImproperlyConfigured(f"{name} must be a size like 10G, 512M or 1048576, not {raw!r}")
    value = int(match.group(1)) * 1024 ** " kmgt".index(match.group(2).lower() or " ")
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum} bytes, not {raw!r}")
    return value


_RATE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")


def envrate(name: str, default: str) -> str:
    """A rate such as 600/minute (DRF's syntax: N/second|minute|hour|day)."""
    value = os.environ.get(name, default).strip()
    if not _RATE.match(value):
        raise ImproperlyConfigured(f"{name} must look like 600/minute, not {value!r}")
    return value


_GPU_ENTRY = re.compile(r"^([A-Za-z][A-Za-z0-9]{0,15}):([1-9][0-9]{0,2})$")


def envgpus(name: str) -> dict[str, int]:
    """GPU types and how many devices of each, like `a10g:1,a100:2`: {"A10G": 1, "A100": 2}
    (types upper-cased, in the order given; empty when unset)."""
    raw = os.environ.get(name, "")
    found: dict[str, int] = {}
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        match = _GPU_ENTRY.match(entry)
        if not match:
            raise ImproperlyConfigured(
                f"{name} must list GPU types with their device counts like a10g:1,a100:2, "
                f"not {entry!r} in {raw!r}"
            )
        kind = match.group(1).upper()
        if kind in found:
            raise ImproperlyConfigured(f"{name} names {kind} twice in {raw!r}")
        found[kind] = int(match.group(2))
    return found


def envgpushapes(name: str) -> dict:
    """Each GPU type's sandbox shape (`sandboxes.gpu.GpuShape`): the defaults, with what
    `a10g:cpus=8,memory=32g,disk=100g,shm=8g;a100:memory=96g` gives in place of theirs."""
    raw = os.environ.get(name, "")
    try:
        return parse_shapes(raw)
    except ShapeError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}; write it like {EXAMPLE}") from None


_CSP_DIRECTIVES = frozenset(
    "default-src script-src style-src img-src font-src connect-src media-src frame-src "
    "worker-src manifest-src child-src form-action frame-ancestors base-uri object-src".split()
)
# A keyword or a hash ('self', 'sha256-…') or a host or scheme source (https://cdn.example.com).
_CSP_SOURCE = re.compile(r"^('[A-Za-z0-9+/=-]+'|[A-Za-z0-9*][A-Za-z0-9_.*:/+=?#@%&~-]*)$")


def envcsp(name: str) -> dict[str, list[str]]:
    """Content-Security-Policy sources to add, like `script-src https://cdn.example.com;
    connect-src https://stats.example.com`: {"script-src": ["https://cdn.example.com"], …}.
    Only known fetch and navigation directives; 'unsafe-inline' and 'unsafe-eval' are refused
    in script-src (an inline script takes the request's nonce instead)."""
    raw = os.environ.get(name, "")
    found: dict[str, list[str]] = {}
    for part in (item.strip() for item in raw.split(";")):
        if not part:
            continue
        directive, *sources = part.split()
        directive = directive.lower()
        if directive not in _CSP_DIRECTIVES:
            raise ImproperlyConfigured(
                f"{name} names {directive!r}, not one of {', '.join(sorted(_CSP_DIRECTIVES))}"
            )
        if not sources or not all(_CSP_SOURCE.match(s) for s in sources):
            raise ImproperlyConfigured(
                f"{name} must give {directive} sources like https://cdn.example.com, not {part!r}"
            )
        if directive == "script-src" and {"'unsafe-inline'", "'unsafe-eval'"} & set(sources):
            raise ImproperlyConfigured(
                f"{name} may not allow 'unsafe-inline' or 'unsafe-eval' scripts: give an inline "
                'script the request\'s nonce (nonce="{{ request.csp_nonce }}")'
            )
        found.setdefault(directive, []).extend(sources)
    return found
