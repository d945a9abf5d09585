"""Containers the security tests start themselves: sandbox-like ones and HTTP listeners."""

import socket
import time
import uuid

import docker
import pytest
from django.conf import settings


def start_sandbox_like(
    client: docker.DockerClient, command: list[str], *, role: str, network: str | None = None
):
    """A container as sandboxes run (the sandbox image and runtime, user 1000, no
    capabilities), on the sandbox network unless `network` is given; labelled with `role`."""
    return client.containers.run(
        settings.BELVEDIR_SANDBOX_IMAGE,
        command,
        detach=True,
        name=f"belvedir-test-{role}-{uuid.uuid4().hex[:8]}",
        network=network or settings.BELVEDIR_SANDBOX_NETWORK,
        runtime=settings.BELVEDIR_SANDBOX_RUNTIME,
        user="1000:1000",
        cap_drop=["ALL"],
        labels={"belvedir.test": role},
    )


def listening_address(container, network: str, port: int) -> str:
    """The container's address on `network`, once it answers on `port` from the host."""
    container.reload()
    address = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return address
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"{container.name} never listened: {container.logs()!r}")
            time.sleep(0.2)
