"""Build the sandbox image (`belvedir-sandbox:latest`).

Two recipes behind one entry point, `build_image()`:

- ``dockerfile``: `sandboxes/Dockerfile` on top of `debian:trixie-slim`, for machines
  that reach an image registry;
- ``offline``: `debootstrap` Debian trixie (minbase) from the Debian mirror, customise the
  root filesystem, and `docker import` it. The debootstrapped rootfs is cached as a tarball
  under the cache dir, so a forced rebuild takes seconds, not minutes (`sandboxes.offline_image`).

Both produce the same image: git, Python 3 (+ venv, pip, a user-owned venv at /opt/venv first
on PATH), Node + npm, curl, tmux and asciinema (Harbor's terminus-2 agent types into a tmux
session of the task container and records it; offline it cannot install them: about 6 MB), the
host's CA bundle at /etc/ssl/certs/ca-certificates.crt, user
`sandbox` (uid/gid 1000, home /home/sandbox) and a writable /workspace as the workdir.

Run it as `python manage.py sandbox_image`, or standalone as `python -m sandboxes.image`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import docker
import docker.errors
import requests

from sandboxes.base import SandboxError
from sandboxes.image_recipe import (
    DOCKERFILE,
    LABEL_RECIPE_DIGEST,
    VENV_CONSTRAINTS,
    ImageConfig,
    Say,
    copy_node_sdk,
    recipe_digest,
    short,
    split_tag,
)

Recipe = Literal["auto", "offline", "dockerfile"]


@dataclass(frozen=True)
class BuildResult:
    """What `build_image()` did: `recipe` is "existing" when nothing was built."""

    image: str
    image_id: str
    recipe: str
    seconds: float


def build_image(
    *,
    force: bool = False,
    recipe: Recipe = "auto",
    refresh_rootfs: bool = False,
    config: ImageConfig | None = None,
    client: docker.DockerClient | None = None,
    say: Say = print,
) -> BuildResult:
    """Build the sandbox image unless it exists, built from this recipe (its
    `LABEL_RECIPE_DIGEST` is `recipe_digest()`), or `force`; return what happened.

    `recipe="auto"` uses the Dockerfile when the base image is present or can be pulled,
    else the offline recipe. `refresh_rootfs` ignores the cached debootstrap tarball.
    Raises SandboxError with a readable message on failure.
    """
    cfg = config or ImageConfig.from_env()
    client = client or _client()
    started = time.monotonic()

    existing = _image_id(client, cfg.image)
    digest = recipe_digest()
    built_from = _image_label(client, cfg.image, LABEL_RECIPE_DIGEST) if existing else None
    if existing and not force and built_from == digest:
        say(f"sandbox image: {cfg.image} already exists ({existing[7:19]}); --force rebuilds it")
        return BuildResult(cfg.image, existing, "existing", time.monotonic() - started)
    if existing and not force:
        say(
            f"sandbox image: {cfg.image} ({existing[7:19]}) was built from another recipe "
            f"({built_from or 'unlabelled'}, now {digest}): building it again"
        )

    if not cfg.ca_bundle.is_file():
        raise SandboxError(f"CA bundle {cfg.ca_bundle} does not exist (BELVEDIR_SANDBOX_CA_BUNDLE)")

    if recipe == "auto":
        recipe = "dockerfile" if registry_answers(client, cfg, say=say) else "offline"
    say(f"sandbox image: building {cfg.image} with the {recipe} recipe")
    if recipe == "dockerfile":
        _build_with_dockerfile(client, cfg, say=say, no_cache=refresh_rootfs)
    elif recipe == "offline":
        from sandboxes.offline_image import build_offline  # debootstrap and chroot, root only

        build_offline(client, cfg, say=say, refresh_rootfs=refresh_rootfs)
    else:
        raise SandboxError(f"unknown recipe {recipe!r} (auto, offline or dockerfile)")

    image_id = _image_id(client, cfg.image)
    if not image_id:
        raise SandboxError(f"the build finished but {cfg.image} is not in the image list")
    if existing and existing != image_id:
        _remove_untagged(client, existing, say=say)
    seconds = time.monotonic() - started
    say(f"sandbox image: built {cfg.image} ({image_id[7:19]}) in {seconds:.0f}s")
    return BuildResult(cfg.image, image_id, recipe, seconds)


def registry_answers(client: docker.DockerClient, cfg: ImageConfig, *, say: Say = print) -> bool:
    """True when the Dockerfile's base image is here or can be pulled within the timeout."""
    if _image_id(client, cfg.base_image):
        return True
    say(f"sandbox image: trying to pull {cfg.base_image} ({cfg.registry_timeout:.0f}s timeout)")
    repository, tag = split_tag(cfg.base_image)
    probe = _client(timeout=cfg.registry_timeout)
    try:
        for event in probe.api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                say(f"sandbox image: no registry ({event['error']})")
                return False
    except (docker.errors.DockerException, requests.RequestException) as exc:
        say(f"sandbox image: no registry ({short(exc)})")
        return False
    finally:
        probe.close()
    return bool(_image_id(client, cfg.base_image))


# --- the Dockerfile recipe ---------------------------------------------------------------


def _build_with_dockerfile(
    client: docker.DockerClient, cfg: ImageConfig, *, say: Say, no_cache: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="belvedir-sandbox-ctx-") as ctx:
        shutil.copyfile(DOCKERFILE, Path(ctx) / "Dockerfile")
        shutil.copyfile(cfg.ca_bundle, Path(ctx) / "ca-certificates.crt")
        shutil.copyfile(VENV_CONSTRAINTS, Path(ctx) / VENV_CONSTRAINTS.name)
        copy_node_sdk(Path(ctx) / "node-sdk")
        try:
            events = client.api.build(
                path=ctx,
                tag=cfg.image,
                rm=True,
                forcerm=True,
                nocache=no_cache,
                decode=True,
                buildargs={"BASE_IMAGE": cfg.base_image},
                labels={LABEL_RECIPE_DIGEST: recipe_digest()},
            )
            for event in events:
                if "error" in event:
                    raise SandboxError(f"docker build failed: {event['error'].strip()}")
                line = str(event.get("stream", "")).rstrip()
                if line.startswith("Step ") or line.startswith("Successfully"):
                    say(f"sandbox image: {line}")
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"docker build failed: {short(exc)}") from exc


# --- the offline recipe ------------------------------------------------------------------


# --- helpers -----------------------------------------------------------------------------


def _client(timeout: float | None = None) -> docker.DockerClient:
    try:
        if timeout is None:
            return docker.from_env()
        return docker.from_env(timeout=int(max(1, timeout)))
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"cannot reach the Docker engine ({short(exc)}); run scripts/ensure-docker.sh"
        ) from exc


def _image_id(client: docker.DockerClient, name: str) -> str | None:
    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:
        return None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"cannot inspect image {name}: {short(exc)}") from exc


def _image_label(client: docker.DockerClient, name: str, label: str) -> str | None:
    try:
        return (client.images.get(name).labels or {}).get(label)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"cannot inspect image {name}: {short(exc)}") from exc


def _remove_untagged(client: docker.DockerClient, image_id: str, *, say: Say) -> None:
    """Drop the image a rebuild replaced, unless it is still tagged or used by a container."""
    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
            say(f"sandbox image: removed the previous image {image_id[7:19]}")
    except (docker.errors.DockerException, requests.RequestException):
        pass


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: `python -m sandboxes.image [--force] [--offline]`."""
    parser = argparse.ArgumentParser(description="Build the Belvedir sandbox image.")
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--offline", action="store_true", help="debootstrap + docker import")
    group.add_argument("--dockerfile", action="store_true", help="docker build (needs a registry)")
    parser.add_argument("--refresh-rootfs", action="store_true", help="ignore cached rootfs")
    args = parser.parse_args(argv)
    recipe: Recipe = "offline" if args.offline else "dockerfile" if args.dockerfile else "auto"
    try:
        build_image(force=args.force, recipe=recipe, refresh_rootfs=args.refresh_rootfs)
    except SandboxError as exc:
        print(f"sandbox image: ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
