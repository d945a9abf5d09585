"""`manage.py sandbox_gateway`: serve the sandbox gateway (see sandboxes/gateway.py)."""

import asyncio
import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from belvedir.sandbox_config import get_backend
from runs.models import Run
from sandboxes.gateway import Gateway, Limits
from sandboxes.gateway_tenants import MappedTenants, Tenants


def default_listen() -> str:
    return f"{settings.BELVEDIR_SANDBOX_GATEWAY}:{settings.BELVEDIR_SANDBOX_PORTS.split(':')[0]}"


def default_timeout() -> float:
    """Idle seconds before a connection is dropped: 600, or longer than a task sandbox's image
    build (its create answers only once the image is built and the container runs; cut off
    earlier, the driver would lose a sandbox that holds one of its run's slots)."""
    return float(max(600, settings.BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT + 300))


# Limits' fields and the BELVEDIR_SANDBOX_GATEWAY_* setting each comes from.
LIMIT_SETTINGS = {
    "total": "MAX_CONNECTIONS",
    "per_organization": "PER_ORGANIZATION",
    "per_run": "PER_RUN",
    "per_address": "PER_SANDBOX",
    "head_timeout": "HEAD_TIMEOUT",
    "body_grace": "BODY_GRACE",
    "body_min_rate": "BODY_MIN_RATE",
    "send_timeout": "SEND_TIMEOUT",
}


def limits() -> Limits:
    return Limits(
        **{
            field: getattr(settings, f"BELVEDIR_SANDBOX_GATEWAY_{name}")
            for field, name in LIMIT_SETTINGS.items()
        }
    )


def organizations_of(run_ids: list[str]) -> dict[str, str]:
    """Each known run's organization id (on the tenants' one thread, with its own connection)."""
    close_old_connections()
    found = Run.objects.filter(pk__in=run_ids).values_list("pk", "project__organization_id")
    return {run_id: str(organization_id) for run_id, organization_id in found}


def tenants() -> Tenants:
    """Whose a sandbox's address is: the sandbox network's sandboxes on this host's engine, as
    the backend tells (none under BELVEDIR_SANDBOX_HOST_NETWORK: every address is its own
    tenant)."""
    if settings.BELVEDIR_SANDBOX_HOST_NETWORK:
        return MappedTenants()
    return get_backend().tenants(
        network=settings.BELVEDIR_SANDBOX_NETWORK, organization_of=organizations_of
    )


class Command(BaseCommand):
    help = (
        "Forward the sandbox-facing endpoints (tasks, traces, outcomes, the router, adapter "
        "downloads, the drivers' git repositories) from the sandbox network's gateway IP to the "
        "platform's server."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--listen",
            default=None,
            help="host:port to listen on (default: BELVEDIR_SANDBOX_GATEWAY and the first of "
            "BELVEDIR_SANDBOX_PORTS, e.g. 172.30.0.1:18700)",
        )
        parser.add_argument(
            "--upstream",
            default=None,
            help="the platform's server (default BELVEDIR_SANDBOX_GATEWAY_UPSTREAM, "
            "http://127.0.0.1:8000)",
        )
        parser.add_argument(
            "--task-upstream",
            default=None,
            help="where the task-sandbox paths go (default BELVEDIR_SANDBOX_GATEWAY_TASK_UPSTREAM, "
            "blank: the upstream); on a worker host, a platform process on this host's engine",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="idle seconds (default 600, or BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT + 300 if longer)",
        )

    def handle(
        self,
        *args,
        listen: str | None,
        upstream: str | None,
        task_upstream: str | None,
        timeout: float | None,
        **options,
    ):
        host, sep, port = (listen or default_listen()).rpartition(":")
        if not sep or not host or not port.isdigit():
            raise CommandError(f"--listen must be host:port, not {listen!r}")
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        try:
            gateway = Gateway(
                host=host,
                port=int(port),
                upstream=upstream or settings.BELVEDIR_SANDBOX_GATEWAY_UPSTREAM,
                task_upstream=task_upstream or settings.BELVEDIR_SANDBOX_GATEWAY_TASK_UPSTREAM,
                timeout=timeout or default_timeout(),
                limits=limits(),
                tenants=tenants(),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        try:
            asyncio.run(gateway.serve())
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc}") from None
        except KeyboardInterrupt:
            pass
