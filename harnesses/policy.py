"""What a harness may carry: env keys, the Tasks field, the repo URL."""

import ipaddress
import os
import re
import socket
from urllib.parse import urlparse

from belvedir.errors import Invalid
from belvedir.net_policy import host_allowed, internal_host_refusal
from belvedir.validators import has_unstorable
from harnesses import drivers, tasks_format

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TASKS_MAX_BYTES = tasks_format.MAX_BYTES
ENV_MAX_KEYS = 200
ENV_VALUE_MAX_CHARS = 32 * 1024
REPO_URL_MAX_CHARS = 500  # Harness.repo_url
REF_MAX_CHARS = 200  # Harness.ref


def validate_name(value, *, max_chars: int, required: bool = True) -> str:
    """A harness's, an environment's or an environment generation's name: stripped, at most
    `max_chars` characters (the model field's), and not blank when `required`."""
    name = str(value or "").strip()
    if required and not name:
        raise Invalid("name is required.", field="name")
    if len(name) > max_chars:
        raise Invalid(f"name must be at most {max_chars} characters.", field="name")
    return name


# Keys that change how the sandbox itself installs or runs.
# BASH_ENV: bash sources it before the install and run commands; LD_AUDIT: like LD_PRELOAD.
_REFUSED_EXACT = {
    "PATH",
    "HOME",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONHOME",
    "BASH_ENV",
}
_REFUSED_ANY_CASE = {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"}
_REFUSED_PREFIXES = ("BELVEDIR_", "FRACTAL_")
# Harness env that the Harbor driver reads, BELVEDIR_MODEL_PROXY=off (the sandbox gets the
# run's raw model keys instead of the router) and BELVEDIR_INSTALL_CACHE=off (no install cache,
# harnesses/install_cache.py): not contract names, so allowed.
_ALLOWED_BELVEDIR = {
    "BELVEDIR_AGENT_URL",
    "BELVEDIR_AGENT_TOKEN",
    "BELVEDIR_MODEL_PROXY",
    "BELVEDIR_INSTALL_CACHE",
}


def env_key_refusal(key: str) -> str | None:
    """Why this env key is refused, or None when it is allowed."""
    if not isinstance(key, str) or not ENV_NAME.match(key):
        return f"{key!r} is not a valid environment variable name (letters, digits and _; not starting with a digit)."
    if key in _REFUSED_EXACT or key.upper() in _REFUSED_ANY_CASE:
        return f"{key} changes how the sandbox installs or runs and cannot be set; put that configuration in your install command instead."
    if key.upper().startswith(_REFUSED_PREFIXES) and key.upper() not in _ALLOWED_BELVEDIR:
        return f"{key} is a name the harness contract sets itself and cannot be set on the harness."
    return None


def validate_env(env) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise Invalid("env must be an object of KEY: value strings.", field="env")
    if len(env) > ENV_MAX_KEYS:
        raise Invalid(f"env can hold at most {ENV_MAX_KEYS} variables.", field="env")
    clean: dict[str, str] = {}
    for key, value in env.items():
        refusal = env_key_refusal(key)
        if refusal:
            raise Invalid(f"env key {refusal}", field="env")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise Invalid(f"env key {key}: the value must be a string.", field="env")
        value = str(value)
        if len(value) > ENV_VALUE_MAX_CHARS:
            raise Invalid(
                f"env key {key}: the value is longer than {ENV_VALUE_MAX_CHARS} characters.",
                field="env",
            )
        if has_unstorable(value):
            raise Invalid(
                f"env key {key}: the value contains a NUL or an unpaired surrogate character.",
                field="env",
            )
        clean[key] = value
    return clean


def validate_tasks(tasks: str | None) -> str:
    tasks = tasks or ""
    if not isinstance(tasks, str):
        raise Invalid("tasks must be text.", field="tasks")
    size = len(tasks.encode("utf-8"))
    tasks_format.size_check(size, "tasks")
    return tasks


def file_repo_refusal(path: str) -> str | None:
    """Why a file:// repo at `path` may not be used here, or None.

    file:// repos read the worker's own disk, other tenants' files included: allowed under
    BELVEDIR_DEV=1 (single-tenant development), else only inside BELVEDIR_FILE_REPO_ROOT.
    """
    from django.conf import settings

    if settings.BELVEDIR_DEV:
        return None
    root = settings.BELVEDIR_FILE_REPO_ROOT
    if not root:
        return (
            "file:// repositories are not allowed on this platform; use an https, ssh or git URL."
        )
    real_root = os.path.realpath(root)
    real_path = os.path.realpath(path)
    if "%" in path or os.path.commonpath([real_root, real_path]) != real_root:
        return f"file:// repositories must be under {root} on this platform."
    return None


_SCP_LIKE = re.compile(r"^[A-Za-z0-9_.-]+@([A-Za-z0-9.-]+):[^\s]+$")


def _host_allowed(host: str, addresses: list) -> bool:
    from django.conf import settings

    return host_allowed(host, addresses, settings.BELVEDIR_REPO_HOST_ALLOWLIST)


def repo_host_refusal(host: str) -> str | None:
    """Why the worker may not reach this repo host, or None.

    The host is resolved (a literal address needs no lookup) and refused when any address it
    resolves to is loopback, private, link-local, CGNAT, unspecified or multicast: the worker
    would reach the platform's own network. Allowed under BELVEDIR_DEV=1 or when the operator
    lists the host in BELVEDIR_REPO_HOST_ALLOWLIST. A host that does not resolve is left to
    git, which then fails with its own message.
    """
    from django.conf import settings

    if settings.BELVEDIR_DEV:
        return None
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if _host_allowed(host, addresses):
        return None
    refusal = internal_host_refusal(host, addresses)
    return f"{refusal}; repos must be on the public internet." if refusal else None


def _refuse_internal_host(host: str) -> None:
    refusal = repo_host_refusal(host)
    if refusal:
        raise Invalid(f"repo_url: {refusal}", field="repo_url")


def validate_repo_url(url: str | None) -> str:
    url = (url or "").strip()
    if not url:
        raise Invalid("repo_url is required.", field="repo_url")
    if drivers.served_name(url):  # the platform's own drivers, at {BELVEDIR_BASE_URL}/git/
        return url.rstrip("/")
    if len(url) > REPO_URL_MAX_CHARS:
        raise Invalid(
            f"repo_url must be at most {REPO_URL_MAX_CHARS} characters.", field="repo_url"
        )
    if any(c.isspace() for c in url) or url.startswith("-"):
        raise Invalid("repo_url must be a git URL without spaces.", field="repo_url")
    scp_like = _SCP_LIKE.match(url)
    if scp_like:  # git@github.com:org/repo.git
        _refuse_internal_host(scp_like.group(1))
        return url
    try:
        parsed = urlparse(url)
    except ValueError:  # e.g. an unclosed [IPv6] host
        raise Invalid("repo_url is not a valid URL.", field="repo_url") from None
    if parsed.scheme not in {"https", "ssh", "git", "file"}:
        raise Invalid(
            "repo_url must be a git URL: https://, ssh://, git://, git@host:path or file://.",
            field="repo_url",
        )
    if parsed.scheme == "file":
        # file:///abs/path only: file://relative/path would read "relative" as a host.
        if parsed.netloc or not parsed.path.startswith("/") or not parsed.path.strip("/"):
            raise Invalid(
                "A file:// repo_url needs an absolute path: file:///path/to/repo.", field="repo_url"
            )
        refusal = file_repo_refusal(parsed.path)
        if refusal:
            raise Invalid(f"repo_url: {refusal}", field="repo_url")
    elif not parsed.hostname or not parsed.path.strip("/"):
        raise Invalid("repo_url must name a host and a repository path.", field="repo_url")
    else:
        _refuse_internal_host(parsed.hostname)
    return url


_REF = re.compile(r"^[A-Za-z0-9._/@+-]*$")


def validate_ref(ref: str | None) -> str:
    ref = (ref or "").strip()
    if len(ref) > REF_MAX_CHARS:
        raise Invalid(f"ref must be at most {REF_MAX_CHARS} characters.", field="ref")
    if ref.startswith("-") or not _REF.match(ref) or ".." in ref:
        raise Invalid("ref must be a branch, tag or commit name.", field="ref")
    return ref
