"""The Docker engine as the backend reaches it: one client per process and engine, and the SDK's
errors turned into `SandboxError`. The one wrapper around the docker SDK's client that every
Docker module of this package shares.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import docker
import docker.errors
import requests

from sandboxes.base import SandboxError

_clients: dict[tuple[int, str], docker.DockerClient] = {}
_clients_lock = threading.Lock()


def shared_client() -> docker.DockerClient:
    """`docker.from_env()`, made once per process and engine (DOCKER_HOST): a new client costs
    a connection and a `/version` call (10-25 ms), which every launch and every run paid."""
    key = (os.getpid(), os.environ.get("DOCKER_HOST", ""))
    with _clients_lock:
        if key not in _clients:
            with docker_errors("reach the Docker engine"):
                _clients[key] = docker.from_env()
        return _clients[key]


@contextmanager
def docker_errors(action: str, *, image: str | None = None) -> Iterator[None]:
    """Turn docker SDK and HTTP errors into SandboxError("could not <action>: …")."""
    try:
        yield
    except SandboxError:
        raise
    except docker.errors.ImageNotFound as exc:
        hint = f"image {image} is missing; run `python manage.py sandbox_image`" if image else ""
        raise SandboxError(f"could not {action}: {hint or short(exc)}") from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"could not {action}: {short(exc)}") from exc


def short(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip()[:300]


def container_name() -> str:
    """A sandbox's name: random, nothing of its run (the run id is in its labels), since
    every container on the network can look a name up (and an address back to its name)."""
    return f"belvedir-{secrets.token_hex(8)}"
